"""`sglang-repro compare` end to end on the CPU reference server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
LONG = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"

# A claim about the harness, not the model: its reference servers are the torch-free stand-in (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.standin]


def report_of(stdout: str) -> dict:
    html = next(line.split("report: ", 1)[1] for line in stdout.splitlines() if line.startswith("report: "))
    return json.loads((Path(html).parent / "report.json").read_text())


def test_demo_scenario_before_crashes_after_passes(run_cli, tmp_path):
    res = run_cli("compare", LONG, "--reference", "--case", "tokens=276", "--out", tmp_path, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "verdict: every expectation held" in res.stdout
    report = report_of(res.stdout)
    assert report["all_expectations_held"] is True
    cases = {c["case"]: c for c in report["cases"]}
    assert set(cases) == {"tokens=276,path=eager", "tokens=276,path=graph"}
    for name, case in cases.items():
        roles = {r["role"]: r for r in case["roles"]}
        assert roles["after"]["outcomes"] == ["pass"]
        if "eager" in name:
            assert roles["before"]["outcomes"] == ["crash"]
            assert roles["before"]["signatures"] == ["frozen-kv-mtp-stale-out-cache-loc"]
        else:
            assert roles["before"]["outcomes"] == ["pass"]
    html = (Path(report["cases"][0]["roles"][0]["artifact_dirs"][0]).parts[0])
    assert html == "runs"
    # the module's marker reached every server compare started (tests/conftest.py)
    logs = list(tmp_path.rglob("server*.log"))
    assert logs and all("sim_scheduler='standin'" in p.read_text(errors="replace") for p in logs), logs


def _cost_scenario(tmp_path: Path, before: str, after: str) -> Path:
    """A short graph-path scenario whose roles are two reference-server builds given as knobs."""
    data = yaml.safe_load(LONG.read_text())
    data.pop("matrix")
    data["server"]["args"].update({"speculative-num-steps": 5, "speculative-num-draft-tokens": 6})
    data["workload"].update(requests=3, concurrency=1, max_new_tokens=24, prompt={"tokens": 64, "seed": 5})
    data["builds"] = {"before": {"spec": "pip:sglang==0.5.15", "sim": before},
                      "after": {"spec": "pip:sglang==0.5.15", "sim": after}}
    data["expect"] = {"before": {"outcome": "pass"}, "after": {"outcome": "pass"}}
    path = tmp_path / "cost.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _metric(report: dict, name: str) -> dict:
    (case,) = report["cases"]
    return next(m for m in case["metrics"] if m["metric"] == name)


def test_twice_the_step_cost_is_reported_worse(run_cli, tmp_path):
    path = _cost_scenario(tmp_path, "post-fix,step-cost-ms=60", "post-fix,step-cost-ms=120")
    # 7 trials a side: with 5, the rank test reaches p < 0.01 only at complete separation, so one trial
    # stalled by a loaded machine turned a doubled step cost into "same" (seen in a full make test).
    res = run_cli("compare", path, "--reference", "--trials", "7", "--out", tmp_path, timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    tput = _metric(report_of(res.stdout), "output_throughput_tok_s")
    assert tput["verdict"] == "worse", tput
    assert tput["p_value"] < 0.01
    assert tput["delta_rel"] < -0.2
    # Acceptance length does not depend on speed: the same seeded prompts verify the same way.
    assert _metric(report_of(res.stdout), "accept_length")["verdict"] == "same"


def test_identical_builds_are_reported_same(run_cli, tmp_path):
    path = _cost_scenario(tmp_path, "post-fix,step-cost-ms=60", "post-fix,step-cost-ms=60")
    res = run_cli("compare", path, "--reference", "--trials", "5", "--out", tmp_path, timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    report = report_of(res.stdout)
    assert _metric(report, "accept_length")["verdict"] == "same"
    assert _metric(report, "output_throughput_tok_s")["verdict"] == "same"


def test_unknown_role_is_usage_error(run_cli, tmp_path):
    res = run_cli("compare", LONG, "--build", "later=sim:post-fix", "--out", tmp_path)
    assert res.returncode == 2
    assert "no build role 'later'" in res.stderr


def _probe_counting_python(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """An interpreter whose environment has a (tiny) sglang, noting each time the harness probes it for sglang
    (the probe script looks for it with find_spec; describing the packages adds --packages)."""
    src = tmp_path / name / "src"
    (src / "sglang").mkdir(parents=True)
    (src / "sglang" / "__init__.py").write_text('__version__ = "0.0.1"\n')
    log = tmp_path / name / "probes.log"
    wrapper = tmp_path / name / "python"
    wrapper.write_text(f'#!/bin/sh\ncase "$2" in *find_spec*) [ "$3" = --packages ] || echo probe >> "{log}";; esac\n'
                       f'PYTHONPATH="{src}" exec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, log


def test_a_comparison_resolves_each_build_once(run_cli, tmp_path):
    before, before_log = _probe_counting_python(tmp_path, "before")
    after, after_log = _probe_counting_python(tmp_path, "after")
    res = run_cli("compare", LONG, "--case", "tokens=276", "--trials", "5", "--before", f"python:{before}",
                  "--after", f"python:{after}", "--out", tmp_path / "out",
                  env={"SGLANG_REPRO_CACHE": str(tmp_path / "cache")}, timeout=300)
    # This sglang has no flag parser: every run stops at pre-flight, after its build was resolved.
    assert res.returncode == 3, res.stdout + res.stderr
    assert len(list((tmp_path / "out").rglob("result.json"))) == 2 * 2 * 5  # cases x roles x trials
    assert before_log.read_text().splitlines() == ["probe"]
    assert after_log.read_text().splitlines() == ["probe"]
