"""``--set FIELD=VALUE``: a seed scenario pointed at another host from the command line, validated like the file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.scenario import ScenarioError, load_file, parse_set
from harness.util.errors import UserError

REPO = Path(__file__).resolve().parents[2]
LONG = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"
H200 = ["--set", "server.model=/models/gemma-4-31B-it", "--set", "hardware.gpu_name=H200", "--set", "hardware.gpus=8"]


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=False)


def test_the_readme_overrides_reach_every_case_and_its_sglang_command() -> None:
    res = _cli("list", LONG, "--format", "json", *H200)
    assert res.returncode == 0, res.stderr
    cases = json.loads(res.stdout)
    assert cases and all(c["argv"][c["argv"].index("--model-path") + 1] == "/models/gemma-4-31B-it" for c in cases)
    loaded = load_file(LONG, overrides=[parse_set(t) for t in H200[1::2]])
    assert {(c.scenario.hardware.gpu_name, c.scenario.hardware.gpus) for c in loaded.cases} == {("H200", 8)}


@pytest.mark.parametrize(("override", "expected"), [
    ("hardware.gpus=eight", "--set hardware.gpus=eight: hardware.gpus: Input should be a valid integer"),
    ("hardwar.gpus=8", "--set hardwar.gpus=8: hardwar: unknown key 'hardwar'; did you mean 'hardware'?"),
    ("hardware.gpus.count=8", "--set hardware.gpus.count=8: hardware.gpus.count: hardware.gpus is not a mapping"),
    ("workload.max_new_tokens=0", "--set workload.max_new_tokens=0: workload.max_new_tokens: Input should be "
                                  "greater than or equal to 1"),
])
def test_a_bad_override_is_one_line_naming_it_exit_2(override: str, expected: str) -> None:
    res = _cli("validate", LONG, "--set", override)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{LONG}: {expected}"), res.stderr


@pytest.mark.parametrize("text", ["gpus", "=8", "hardware..gpus=8", "matrix.tokens=1", "server.args={a: 1}"])
def test_an_override_that_is_not_field_equals_scalar_is_refused(text: str) -> None:
    with pytest.raises(UserError, match=r"^--set "):
        parse_set(text)
    res = _cli("validate", LONG, "--set", text)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and "--set" in res.stderr


def test_values_are_yaml_scalars_and_null_removes_a_server_flag() -> None:
    sets = [parse_set("server.args.tp-size=8"), parse_set("server.args.enable-hierarchical-cache=null"),
            parse_set("server.draft_model=/models/assistant"), parse_set("workload.temperature=0.5")]
    case = load_file(LONG, overrides=sets).cases[0]
    args = case.scenario.server.args
    assert args["tp-size"] == 8 and "enable-hierarchical-cache" not in args
    assert case.scenario.server.draft_model == "/models/assistant" and case.scenario.workload.temperature == 0.5


def test_a_matrix_case_keeps_its_own_value() -> None:
    """The case is defined by its matrix value: an override of the same field changes the other cases only."""
    loaded = load_file(LONG, overrides=[parse_set("workload.prompt.tokens=100")])
    tokens = {c.name: c.scenario.workload.prompt.tokens for c in loaded.cases}
    assert tokens["tokens=276,path=eager"] == 276


def test_the_file_without_overrides_is_untouched() -> None:
    with pytest.raises(ScenarioError):
        load_file(LONG, overrides=[parse_set("hardware.gpus=-1")])
    assert load_file(LONG).cases[0].scenario.hardware.gpus == 4


# ---------------------------------------------------------------- `#` inside a plain scalar


def test_validate_warns_where_yaml_drops_text_after_a_hash(tmp_path: Path) -> None:
    """``description: fixed by PR #29616`` keeps only 'fixed by PR': valid, so a warning, exit 0."""
    text = LONG.read_text().replace('description: "last release without PR #29616"',
                                    "description: last release without PR #29616  # a real comment stays quiet")
    assert "without PR #29616  #" in text
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    res = _cli("validate", bad)
    assert res.returncode == 0, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(f"{bad}:60:") and "builds.before.description: warning: '#29616" in line
    assert "quote the value" in line


def test_the_seed_scenarios_keep_their_hashes() -> None:
    res = _cli("validate", "-q", REPO / "scenarios", REPO / "fixtures" / "bisect")
    assert res.returncode == 0 and res.stderr == "", res.stderr
    builds = load_file(LONG).scenario.builds
    assert builds["before"].description == "last release without PR #29616"
