"""The known-bug check before a report is written: a run whose traceback matches #28264 on a build without the fix
gets the "known bug, upgrade" verdict and exit 4, nothing written (``--force`` writes it, the verdict on top); with
the fix present the report is written, as a regression pointing at #28264.

Two kinds of run: real runs of the reference server (the release it stands for is the one its scenario maps its
revision to: copies of the scenario whose ``before`` role, ``sim: pre-fix``, is 0.5.14 in one, 0.5.16 in the
other), and run folders of a real build whose log is the real 0.5.14 ``fill_from`` traceback (fixtures/tracebacks),
recorded as 0.5.14 and as 0.5.16.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from harness.util.errors import EXIT_KNOWN_BUG
from tests.helpers import make_record
from tests.upstream import sources

pytestmark = [pytest.mark.slow, pytest.mark.standin]

REAL_LOG = sources.REPO / "fixtures" / "tracebacks" / "sglang-0.5.14-real-fill_from-cpu.log"


def _scenario_mapping_pre_fix_to(version: str, folder: Path) -> Path:
    data = yaml.safe_load((sources.REPO / sources.LONG).read_text(encoding="utf-8"))
    data["builds"]["before"]["spec"] = f"pip:sglang=={version}"  # the role whose reference revision is pre-fix
    path = folder / f"maps-to-{version}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def reference_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("known")
    out = {}
    for version in ("0.5.14", "0.5.16"):
        scenario = _scenario_mapping_pre_fix_to(version, root)
        done = sources.harness("run", scenario, "--case", "tokens=276,path=eager", "--build", "sim:pre-fix",
                               "--out", root / version, "--no-store")
        assert done.returncode == 1, done.stdout + done.stderr
        (out[version],) = sorted((root / version / "runs").iterdir())
    return out


def test_a_build_without_the_fix_is_a_known_bug_and_nothing_is_written(reference_runs: dict[str, Path],
                                                                      tmp_path: Path) -> None:
    done = sources.harness("issue", reference_runs["0.5.14"], "-o", tmp_path / "issue", "--allow-reference-server")
    assert done.returncode == EXIT_KNOWN_BUG == 4, done.stdout + done.stderr
    assert ("known-bug check: this is sglang#28264, fixed in 0.5.15 by PR #29616; the reference server's pre-fix "
            "revision, standing for sglang 0.5.14") in done.stdout
    assert "lacks the fix: upgrade instead of filing" in done.stdout
    assert not (tmp_path / "issue").exists()


def test_force_writes_it_with_the_verdict_on_top(reference_runs: dict[str, Path], tmp_path: Path) -> None:
    done = sources.harness("issue", reference_runs["0.5.14"], "-o", tmp_path / "issue", "--allow-reference-server",
                           "--force")
    assert done.returncode == 0, done.stdout + done.stderr
    body = (tmp_path / "issue" / "issue.md").read_text(encoding="utf-8")
    describe = body[body.index("### Describe the bug"):]
    assert describe.splitlines()[2].startswith("> **Known-bug check (written anyway: --force):** this is sglang\\#28264")


def test_with_the_fix_present_the_report_is_written_as_a_regression(reference_runs: dict[str, Path],
                                                                    tmp_path: Path) -> None:
    done = sources.harness("issue", reference_runs["0.5.16"], "-o", tmp_path / "issue", "--allow-reference-server")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "has the fix: a regression or a new bug (the report points at sglang#28264)" in done.stdout
    assert (tmp_path / "issue" / "issue.md").is_file()


def test_the_reference_server_is_refused_without_the_flag(reference_runs: dict[str, Path], tmp_path: Path) -> None:
    done = sources.harness("issue", reference_runs["0.5.16"], "-o", tmp_path / "issue")
    assert done.returncode == 2
    assert "a model of SGLang, not SGLang: no report meant for upstream is written" in done.stderr
    assert not (tmp_path / "issue").exists()


def _real_build_run(folder: Path, version: str) -> Path:
    """A run folder of a real build whose server log is the real 0.5.14 fill_from traceback."""
    from harness.records.run_record import record_to_dict

    folder.mkdir(parents=True)
    record = make_record("crash", signature="frozen-kv-mtp-stale-out-cache-loc", spec=f"pip:sglang=={version}",
                         version=version, reason="workload: RuntimeError: output with shape [1] doesn't match the "
                         "broadcast shape [276]", scenario="frozen-kv-mtp-long-prompt-28264", artifacts=str(folder),
                         argv=["/opt/venv/bin/python", "-m", "sglang.launch_server", "--model-path",
                               "google/gemma-4-31B-it", "--port", "41234"])
    data = record_to_dict(record)
    data["build"]["reference_server"] = False
    (folder / "result.json").write_text(json.dumps(data), encoding="utf-8")
    (folder / "server.log").write_text(REAL_LOG.read_text(encoding="utf-8"), encoding="utf-8")
    return folder


@pytest.mark.parametrize(("version", "code", "verdict"), [
    ("0.5.14", 4, "your build 0.5.14 lacks the fix: upgrade instead of filing"),
    ("0.5.16", 0, "your build 0.5.16 has the fix: a regression or a new bug"),
])
def test_a_real_builds_run_is_judged_by_its_release(tmp_path: Path, version: str, code: int, verdict: str) -> None:
    run = _real_build_run(tmp_path / "run", version)
    done = sources.harness("issue", run, "-o", tmp_path / "issue")
    assert done.returncode == code, done.stdout + done.stderr
    assert verdict in done.stdout
    assert (tmp_path / "issue" / "issue.md").is_file() == (code == 0)
    if code == 0:
        body = (tmp_path / "issue" / "issue.md").read_text(encoding="utf-8")
        assert "`python3 -m sglang.check_env` was not kept with this run" in body  # no check_env.json in this folder
        assert "python -m sglang.launch_server --model-path google/gemma-4-31B-it --port 30000" in body
