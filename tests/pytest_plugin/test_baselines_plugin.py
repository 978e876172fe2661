"""Baseline checks in the pytest plugin: skip without a baseline (naming the record command), fail below the
band (naming metric, position, baseline, measured, band), pass within it, ``--update-baselines`` records.

The fast tests replace the run through the plugin's documented hook (``pytest_sglang_repro_run``) with one that
returns the figures a test sets; judging, reporting and recording are the plugin's real code. The last tests
run the seed scenario's case on the real CPU reference server in a subprocess.
"""

from __future__ import annotations

import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import scipy.stats  # noqa: F401  (loaded once here: pytester's in-process runs cannot import numpy a second time)

from harness.baselines.files import load
from harness.baselines.keys import this_cpu_key

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]
GUARD = REPO / "scenarios" / "frozen_kv_mtp" / "accept_length_guard.yaml"
COMMITTED = REPO / "fixtures" / "baselines" / "frozen-kv-mtp-accept-length-guard.yaml"
QUIET = ("-p", "no:hypothesispytest", "-p", "no:anyio")

FIGURES_RUNNER = '''
import json, os
from pathlib import Path
from harness.records.run_record import record_from_dict

def pytest_sglang_repro_run(item, case, role, spec, trial, gpus):
    figures = json.loads(os.environ["FIGURES"])[trial % len(json.loads(os.environ["FIGURES"]))]
    run_dir = Path(os.environ["SGLANG_REPRO_REPORTS"]) / "runs" / f"{case.name}-{role}-t{trial}"
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "server.log").write_text("ready\\n")
    return record_from_dict(dict(
        scenario={"name": case.scenario.name, "file": str(case.file)},
        case={"name": case.name, "values": case.values},
        build={"kind": spec.split(":")[0], "spec": spec, "role": role, "reference_server": spec.startswith("sim:")},
        trial=trial, outcome="pass", reason="all checks held",
        metrics={"requests_ok": 4, "requests_failed": 0, **figures},
        server={"log": str(run_dir / "server.log")}, host={"cpu": "Test CPU 9000", "cpu_count": 4},
        started_at="", duration_s=0.1, harness_version="test", artifacts=str(run_dir),
    ))
'''

SCENARIO = textwrap.dedent("""\
    name: ref-demo
    description: a baseline-checked scenario
    hardware: {gpus: 1}
    server: {model: test/model}
    workload: {requests: 4, prompt: {tokens: 8}, max_new_tokens: 4, trials: 3}
    checks:
      accept_length: {baseline: true}
      accept_by_position: {baseline: true}
    builds:
      after: {spec: "python:/nonexistent/python", sim: post-fix}
    """)

REFERENCE = textwrap.dedent("""\
    version: 1
    scenario: ref-demo
    baselines:
    - case: default
      hardware: cpu Test CPU 9000 x4
      line: sim:post-fix
      build: sim:post-fix
      recorded: '2026-12-03'
      harness_version: 0.1.0
      trials: 10
      accept_length: {mean: 2.5, sd: 0.02}
      accept_by_position:
      - {mean: 0.8, sd: 0.01}
      - {mean: 0.6, sd: 0.01}
    """)


def _figures(accept: float, pos2: float) -> str:
    import json

    rows = [{"accept_length": accept + d, "accept_rate_pos1": 0.8 + d / 10, "accept_rate_pos2": pos2 + d / 10}
            for d in (-0.01, 0.0, 0.01)]
    return json.dumps(rows)


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory):
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("SGLANG_REPRO_REPORTS", str(state / "reports"))
    monkeypatch.setenv("SGLANG_REPRO_LOCK_DIR", str(state / "locks"))
    monkeypatch.setenv("SGLANG_REPRO_GPU_INVENTORY", "")
    monkeypatch.setenv("SGLANG_REPRO_BASELINES", str(state / "baselines"))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    pytester.makeconftest('pytest_plugins = ["harness.pytest_plugin"]\n' + FIGURES_RUNNER)
    (pytester.path / "scenarios").mkdir()
    (pytester.path / "scenarios" / "ref_demo.yaml").write_text(SCENARIO)
    pytester.baselines = state / "baselines"  # type: ignore[attr-defined]
    return pytester


def _refs(project: pytest.Pytester) -> Path:
    return project.baselines / "ref-demo.yaml"  # type: ignore[attr-defined]


def test_no_reference_for_this_hardware_skips_naming_the_record_command(project: pytest.Pytester,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIGURES", _figures(2.5, 0.6))
    result = project.runpytest(*QUIET, "-m", "sim", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*no baseline for cpu Test CPU 9000 x4 (case default on cpu Test CPU 9000 x4, "
                                 "build line sim:post-fix)*record one with `sglang-repro baselines record "
                                 "*ref_demo.yaml --build after --reference --case default`*"])


def test_within_the_band_passes_and_reports_reference_measured_band(project: pytest.Pytester,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _refs(project).parent.mkdir(parents=True)
    _refs(project).write_text(REFERENCE)
    monkeypatch.setenv("FIGURES", _figures(2.5, 0.6))
    result = project.runpytest(*QUIET, "-m", "sim", "-rA", "--junitxml", "junit.xml")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*acceptance length 2.5 over 3 trial(s) held: baseline 2.5 (sd 0.02, 10 trials), "
                                 "band >= 2.4*one-sided pooled t test at a 1.00% false-failure rate*"])
    props = {p.get("name"): p.get("value") for p in ET.parse(project.path / "junit.xml").iter("property")}
    assert props["baseline.accept_length.baseline"] == "2.5"
    assert float(props["baseline.accept_length.band_lower"] or "nan") < 2.5
    assert props["baseline.accept_by_position.pos2.held"] == "True"


def test_a_drop_at_one_position_fails_naming_it(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    _refs(project).parent.mkdir(parents=True)
    _refs(project).write_text(REFERENCE)
    monkeypatch.setenv("FIGURES", _figures(2.5, 0.54))  # position 2 lost 10%
    result = project.runpytest(*QUIET, "-m", "sim")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*1 of 3 baseline check(s) failed against *ref-demo.yaml (cpu Test CPU 9000 x4, build line sim:post-fix, "
        "recorded 2026-12-03 from sim:post-fix):",
        "*acceptance rate at draft position 2 0.54 over 3 trial(s) BELOW the baseline band: baseline 0.6 "
        "(sd 0.01, 10 trials), band >= 0.5*",
    ])
    # The stated rate is the user's: at 1e-9 (t = 11 at 11 degrees of freedom) the band is wide enough to hold it.
    loose = project.runpytest(*QUIET, "-m", "sim", "--baseline-false-failure-rate", "0.000000001")
    loose.assert_outcomes(passed=1)
    bad = project.runpytest(*QUIET, "-m", "sim", "--baseline-false-failure-rate", "0.7")
    assert bad.ret == 4 and "within (0, 0.5)" in bad.stderr.str()


def test_update_baselines_shows_the_change_then_writes_and_keeps_the_old(project: pytest.Pytester,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIGURES", _figures(2.5, 0.6))
    first = project.runpytest(*QUIET, "-m", "sim", "--update-baselines")
    first.assert_outcomes(passed=1)
    written = load(_refs(project))
    assert written is not None
    entry = written.find("default", "cpu Test CPU 9000 x4", "sim:post-fix")
    assert entry is not None and entry.trials == 3 and entry.accept_length is not None
    assert entry.accept_length.mean == pytest.approx(2.5)
    first.stdout.fnmatch_lines(["*+++ *ref-demo.yaml (recorded)*", "*+  accept_length: {mean: 2.5, sd: 0.01}*"])
    # An intended improvement, recorded: the change is shown against the old figures, which the file keeps.
    monkeypatch.setenv("FIGURES", _figures(3.0, 0.7))
    second = project.runpytest(*QUIET, "-m", "sim", "--update-baselines")
    second.assert_outcomes(passed=1)
    second.stdout.fnmatch_lines(["*-  accept_length: {mean: 2.5, sd: 0.01}*", "*+  accept_length: {mean: 3.0, sd: 0.01}*"])
    again = load(_refs(project))
    assert again is not None and again.baselines[0].replaced[0].accept_length is not None
    assert again.baselines[0].replaced[0].accept_length.mean == pytest.approx(2.5)
    # A normal run never writes.
    before = _refs(project).read_text()
    project.runpytest(*QUIET, "-m", "sim").assert_outcomes(passed=1)
    assert _refs(project).read_text() == before


def test_a_bad_references_file_fails_the_item_with_file_and_line(project: pytest.Pytester,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _refs(project).parent.mkdir(parents=True)
    _refs(project).write_text(REFERENCE.replace("  trials: 10\n", "  trials: ten\n"))
    monkeypatch.setenv("FIGURES", _figures(2.5, 0.6))
    result = project.runpytest(*QUIET, "-m", "sim")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*bad input: *ref-demo.yaml:10:*: baselines[[]0[]].trials: *"])


# --------------------------------------------------------------------------- the real reference server


def _guard_project(pytester: pytest.Pytester, agreement: str | None) -> None:
    text = GUARD.read_text()
    if agreement is not None:
        text = text.replace("    sim: post-fix\n", f"    sim: post-fix,draft-agreement={agreement}\n")
        assert f"draft-agreement={agreement}" in text
    (pytester.path / "scenarios" / "frozen_kv_mtp").mkdir(parents=True, exist_ok=True)
    (pytester.path / "scenarios" / "frozen_kv_mtp" / "accept_length_guard.yaml").write_text(text)


@pytest.fixture
def sim_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                tmp_path_factory: pytest.TempPathFactory) -> pytest.Pytester:
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("SGLANG_REPRO_REPORTS", str(state / "reports"))
    monkeypatch.setenv("SGLANG_REPRO_LOCK_DIR", str(state / "locks"))
    monkeypatch.setenv("SGLANG_REPRO_GPU_INVENTORY", "")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    pytester.makeconftest('pytest_plugins = ["harness.pytest_plugin"]\n')
    return pytester


SELECT = ("-m", "sim", "-k", "topk1 and after", "--trials", "2", "-rA")


@pytest.mark.slow
def test_committed_references_judge_this_cpu_or_name_the_record_command(sim_project: pytest.Pytester,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The seed scenario against the repository's baselines: they pass at post-fix on the CPU they were recorded
    on; on any other CPU the item skips naming the command that records one (`make test` cannot fail for it)."""
    # The pytester project is a project of its own (its baselines would be its own baselines/): point it at ours.
    monkeypatch.setenv("SGLANG_REPRO_BASELINES", str(COMMITTED.parent))
    _guard_project(sim_project, None)
    result = sim_project.runpytest_subprocess(*QUIET, *SELECT, timeout=400)
    committed = load(COMMITTED)
    assert committed is not None
    if committed.find("draft=topk1", this_cpu_key(), "sim:post-fix") is not None:
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines(["*acceptance length * held: baseline *"])
    else:
        result.assert_outcomes(skipped=1)
        result.stdout.fnmatch_lines([f"*no baseline for {this_cpu_key()}*sglang-repro baselines record*"])


@pytest.mark.slow
def test_sim_passes_at_post_fix_and_fails_at_a_lowered_draft_agreement(sim_project: pytest.Pytester,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """On any CPU: record this CPU's baseline, then post-fix passes and a lowered draft agreement fails naming
    acceptance length and the baseline."""
    monkeypatch.setenv("SGLANG_REPRO_BASELINES", str(sim_project.path / "refs"))
    _guard_project(sim_project, None)
    recorded = sim_project.runpytest_subprocess(*QUIET, *SELECT, "--update-baselines", timeout=400)
    recorded.assert_outcomes(passed=1)
    assert load(sim_project.path / "refs" / "frozen-kv-mtp-accept-length-guard.yaml") is not None
    sim_project.runpytest_subprocess(*QUIET, *SELECT, timeout=400).assert_outcomes(passed=1)
    _guard_project(sim_project, "0.75")  # every trial holds upstream's 1.5 floor: only the baseline check fails
    lowered = sim_project.runpytest_subprocess(*QUIET, *SELECT, timeout=400)
    lowered.assert_outcomes(failed=1)
    lowered.stdout.fnmatch_lines(["*baseline check(s) failed against*",
                                  "*acceptance length * BELOW the baseline band: baseline *band >= *"])
