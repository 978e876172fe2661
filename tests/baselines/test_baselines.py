"""harness.baselines: the file format (strict, file:line errors), the band's calibration, recording."""

from __future__ import annotations

import random
import textwrap
from pathlib import Path

import pytest

from harness.baselines.check import Summary, band, summarise
from harness.baselines.files import BaselineFileError, dump, load
from harness.baselines.judge import judge_entry
from harness.baselines.model import BaselineFile, Entry, Figure
from harness.baselines.record import entry_from_runs, plan
from harness.records.run_record import record_from_dict
from harness.scenario.model import BaselineCheck, Checks
from harness.util.errors import UserError

GOOD = textwrap.dedent("""\
    version: 1
    scenario: guard
    baselines:
    - case: draft=topk1
      hardware: cpu AMD EPYC x2
      line: sim:post-fix
      build: sim:post-fix
      recorded: '2026-12-03'
      harness_version: 0.1.0
      trials: 10
      accept_length: {mean: 2.5, sd: 0.05}
      accept_by_position:
      - {mean: 0.8, sd: 0.02}
      - {mean: 0.6, sd: 0.02}
    """)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "guard.yaml"
    path.write_text(text)
    return path


def test_a_good_file_loads_and_finds_its_entry(tmp_path: Path) -> None:
    refs = load(_write(tmp_path, GOOD))
    assert refs is not None
    entry = refs.find("draft=topk1", "cpu AMD EPYC x2", "sim:post-fix")
    assert entry is not None and entry.accept_by_position is not None
    assert entry.accept_by_position[1].mean == 0.6
    assert refs.find("draft=topk1", "1x NVIDIA H200", "sim:post-fix") is None


@pytest.mark.parametrize(("edit", "where", "says"), [
    (("  trials: 10\n", "  trials: 1\n"), ":10:", "greater than or equal to 2"),
    (("  accept_length: {mean: 2.5, sd: 0.05}", "  accept_length: {mean: 2.5, sd: -1}"), ":11:", "sd"),
    (("  build: sim:post-fix\n", "  build: sim:post-fix\n  bild: x\n"), ":8:", "unknown key 'bild'"),
    (("  recorded: '2026-12-03'", "  recorded: yesterday"), ":8:", "recorded"),
    (("  trials: 10\n", "  trials: 10\n  trials: 11\n"), ":11:", "duplicate"),
])
def test_a_bad_file_is_one_line_naming_file_line_and_field(tmp_path: Path, edit: tuple[str, str], where: str,
                                                           says: str) -> None:
    path = _write(tmp_path, GOOD.replace(*edit))
    with pytest.raises(BaselineFileError) as err:
        load(path)
    assert len(err.value.lines) == 1, err.value.lines
    line = err.value.lines[0]
    assert line.startswith(f"{path}{where}") and says in line, line


def test_two_entries_for_one_key_are_refused(tmp_path: Path) -> None:
    body = GOOD.split("baselines:\n")[1]
    with pytest.raises(BaselineFileError, match="repeats baselines"):
        load(_write(tmp_path, GOOD + body))


def test_a_written_file_reads_back_the_same(tmp_path: Path) -> None:
    refs = load(_write(tmp_path, GOOD))
    assert refs is not None
    again = _write(tmp_path, dump(refs))
    assert load(again) == refs


def test_the_band_fails_an_unchanged_build_at_about_the_stated_rate() -> None:
    """Draws of one normal distribution (what the pooled test assumes): 4000 checks, 3 trials against 10."""
    rng = random.Random(20261203)
    for rate in (0.01, 0.05):
        fails = 0
        for _ in range(4000):
            ref = summarise([rng.gauss(2.5, 0.05) for _ in range(10)])
            run = summarise([rng.gauss(2.5, 0.05) for _ in range(3)])
            assert ref is not None and run is not None
            fails += not band(ref, run, rate).held
        # Binomial sd at 4000 draws: 0.16 points at 1%, 0.34 at 5%; allow about four of them.
        assert abs(fails / 4000 - rate) < 4 * (rate * (1 - rate) / 4000) ** 0.5 + 0.001, (rate, fails)


def test_a_drop_of_many_spreads_fails_and_a_rise_never_does() -> None:
    ref = Summary(10, 2.5, 0.05)
    assert not band(ref, Summary(3, 2.25, 0.05)).held  # -10%: five spreads
    assert band(ref, Summary(3, 3.5, 0.05)).held  # one-sided: an improvement is not a failure
    # A deterministic model (no spread at all): a rounding difference holds, a real drop fails.
    flat = Summary(10, 2.5, 0.0)
    assert band(flat, Summary(3, 2.5 - 1e-6, 0.0)).held
    assert not band(flat, Summary(3, 2.45, 0.0)).held
    with pytest.raises(ValueError, match="within"):
        band(ref, Summary(3, 2.5, 0.05), rate=0.5)


def _run(trial: int, accept: float, positions: list[float], *, outcome: str = "pass", tput: float = 100.0):
    metrics: dict[str, float] = {"accept_length": accept, "output_throughput_tok_s": tput}
    metrics.update({f"accept_rate_pos{k}": v for k, v in enumerate(positions, 1)})
    return record_from_dict(dict(
        scenario={"name": "guard", "file": "guard.yaml"}, case={"name": "draft=topk1", "values": {}},
        build={"kind": "sim", "spec": "sim:post-fix", "role": "after", "reference_server": True},
        trial=trial, outcome=outcome, reason="", metrics=metrics, server={"log": ""},
        host={"cpu": "AMD EPYC", "cpu_count": 2}, started_at=f"2026-12-03T10:00:0{trial}+00:00", duration_s=1.0,
        harness_version="test", artifacts="",
    ))


def test_a_drop_at_one_position_fails_naming_that_position(tmp_path: Path) -> None:
    refs = load(_write(tmp_path, GOOD))
    assert refs is not None
    entry = refs.baselines[0]
    checks = Checks.model_validate({"accept_length": {"baseline": True}, "accept_by_position": {"baseline": True}})
    steady = [_run(t, 2.5 + 0.01 * t, [0.8, 0.6 + 0.005 * t]) for t in range(3)]
    assert all(v.held for v in judge_entry(checks.baseline_checks(), entry, steady))
    dropped = [_run(t, 2.5, [0.8, 0.54 + 0.005 * t]) for t in range(3)]  # position 2 lost 10%
    verdicts = judge_entry(checks.baseline_checks(), entry, dropped)
    failed = [v for v in verdicts if not v.held]
    assert [(v.metric, v.position) for v in failed] == [("accept_by_position", 2)]
    message = failed[0].message()
    for part in ("acceptance rate at draft position 2", "baseline 0.6", "0.545", "band >= "):
        assert part in message, message


def test_a_figure_no_trial_measured_fails_rather_than_passes(tmp_path: Path) -> None:
    refs = load(_write(tmp_path, GOOD))
    assert refs is not None
    crashed = [_run(t, 2.5, [0.8, 0.6], outcome="crash") for t in range(3)]
    verdicts = judge_entry({"accept_length": BaselineCheck(baseline=True)}, refs.baselines[0], crashed)
    assert [v.held for v in verdicts] == [False]
    assert "not measured" in verdicts[0].message()


def test_recording_keeps_what_it_replaced_and_shows_the_change(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    runs = [_run(t, 2.8 + 0.01 * t, [0.85, 0.65]) for t in range(4)]
    entry = entry_from_runs(runs, case="draft=topk1", hardware="cpu AMD EPYC x2", line="sim:post-fix",
                            today="2026-12-04")
    assert entry.trials == 4 and entry.accept_length is not None and entry.accept_length.mean == pytest.approx(2.815)
    assert entry.output_throughput == Figure(mean=100.0, sd=0.0)
    change = plan(path, "guard", [entry], why="incident abc acknowledged")
    assert "-  accept_length: {mean: 2.5, sd: 0.05}" in change.diff.replace("    ", "  ")
    assert path.read_text() == GOOD  # planning writes nothing
    new = change.new.find("draft=topk1", "cpu AMD EPYC x2", "sim:post-fix")
    assert new is not None and new.replaced[0].accept_length == Figure(mean=2.5, sd=0.05)
    assert new.replaced[0].why == "incident abc acknowledged" and new.replaced[0].replaced_on == "2026-12-04"
    with pytest.raises(UserError, match="at least 2"):
        entry_from_runs(runs[:1], case="c", hardware="h", line="l")


def test_a_reference_file_of_another_scenario_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    entry = Entry(case="c", hardware="h", line="l", build="b", recorded="2026-12-03", harness_version="x", trials=2,
                  accept_length=Figure(mean=1, sd=0))
    with pytest.raises(UserError, match="not 'other'"):
        plan(path, "other", [entry])
    assert BaselineFile(scenario="other").baselines == []


def test_checks_accept_a_reference_alone_and_refuse_a_rate_without_one() -> None:
    checks = Checks.model_validate({"accept_length": {"baseline": True, "false_failure_rate": 0.001},
                                    "output_throughput": {"baseline": True}})
    assert set(checks.baseline_checks()) == {"accept_length", "output_throughput"}
    with pytest.raises(ValueError, match="add baseline: true"):
        Checks.model_validate({"accept_length": {"min": 1.5, "false_failure_rate": 0.01}})
    with pytest.raises(ValueError, match="baseline: true"):
        Checks.model_validate({"output_throughput": {}})


def test_the_position_drop_knob_is_checked_where_it_is_given() -> None:
    from harness.build.spec import parse_build_spec
    from harness.sim.cli_args import parse_position_drop, parse_server_args

    assert parse_build_spec("sim:post-fix,position-drop=2:0.1").spec == "sim:post-fix,position-drop=2:0.1"
    for bad in ("0:0.1", "2:1.5", "2", "x:0.1"):
        with pytest.raises(UserError, match="position-drop"):
            parse_build_spec(f"sim:post-fix,position-drop={bad}")
        assert parse_position_drop(bad) is None
    assert parse_position_drop("3:0.25") == (3, 0.25)
    with pytest.raises(SystemExit):
        parse_server_args(["--model-path", "m", "--sim-position-drop", "0:0.1"])
