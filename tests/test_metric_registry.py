"""The metric registry is the one place a metric's name, direction, minimum effect and source are defined:
the figures a run produces are in it, and compare, history and the checks read it."""

from __future__ import annotations

import pytest

from harness.compare.runner import _metric_specs
from harness.compare.verdicts import DEFAULT_METRICS
from harness.measure.client_side import derive_metrics
from harness.measure.server_side import ServerFigures
from harness.records.metric_definitions import (
    ACCEPT_LENGTH,
    ACCEPT_LENGTH_BY_SOURCE,
    COMPARED,
    METRICS,
    OUTPUT_THROUGHPUT,
    Better,
    Source,
    metric,
    relative_tolerances,
)
from harness.scenario.model import ACCEPT_LENGTH_METRICS, AcceptLengthBound, RelativeChecks
from harness.series.points import METRIC_RULES, rule_for


def test_every_registered_metric_is_a_figure_a_run_produces() -> None:
    produced = set(derive_metrics([])) | set(ServerFigures(None, None).as_metrics())
    assert set(METRICS) <= produced, sorted(set(METRICS) - produced)
    for m in METRICS.values():
        assert m.name and m.label and m.unit and isinstance(m.better, Better) and isinstance(m.source, Source)
        assert m.min_effect is None or 0 < m.min_effect < 1


def test_unknown_metric_is_named() -> None:
    assert metric("ttft_ms_p50").better is Better.LOWER
    with pytest.raises(KeyError, match="no_such_metric"):
        metric("no_such_metric")


def test_a_check_names_an_acceptance_length_by_its_source() -> None:
    assert {s.value for s in ACCEPT_LENGTH_BY_SOURCE} == {"requests", "server", "gauge"}
    assert ACCEPT_LENGTH_METRICS == {"requests": "accept_length", "server": "accept_length_server",
                                     "gauge": "accept_length_gauge"}
    assert AcceptLengthBound(min=2.0, source="gauge").metric == "accept_length_gauge"


def test_relative_checks_map_onto_the_metrics_they_bound() -> None:
    assert relative_tolerances(None) == {}
    assert relative_tolerances(RelativeChecks(baseline="before")) == {}
    rel = RelativeChecks(baseline="before", output_throughput_max_regression=0.1)
    assert relative_tolerances(rel) == {"output_throughput_tok_s": 0.1}
    both = RelativeChecks(baseline="b", accept_length_max_regression=0.03, output_throughput_max_regression=0.2)
    assert relative_tolerances(both) == {"accept_length": 0.03, "output_throughput_tok_s": 0.2}
    # compare: a scenario's tolerance is the smallest effect that counts; the registry's otherwise.
    specs = {s.name: s.min_effect for s in _metric_specs(rel)}
    assert specs == {"accept_length": ACCEPT_LENGTH.min_effect, "output_throughput_tok_s": 0.1}


def test_compare_and_history_judge_with_the_registry() -> None:
    assert [(s.name, s.higher_is_better, s.min_effect) for s in DEFAULT_METRICS] == [
        (m.name, m.higher_is_better, m.min_effect) for m in COMPARED]
    assert COMPARED == (ACCEPT_LENGTH, OUTPUT_THROUGHPUT)
    assert set(METRIC_RULES) == {n for n, m in METRICS.items() if m.min_effect is not None}
    ttft = rule_for("ttft_ms_p50")
    assert ttft is not None and not ttft.higher_is_better and ttft.min_effect == 0.05
    assert rule_for("accept_length", {"accept_length": 0.1}) == type(ttft)(0.1, True)
    assert rule_for("requests_ok") is None  # registered, reported, never judged over history


def test_the_cross_phase_literal_is_the_registrys_list() -> None:
    from typing import get_args

    from harness.records.metric_definitions import CROSS_PHASE
    from harness.scenario.model import CROSS_PHASE_METRICS, CrossPhaseCheck

    assert get_args(CrossPhaseCheck.model_fields["metric"].annotation) == tuple(m.name for m in CROSS_PHASE)
    assert tuple(m.name for m in CROSS_PHASE) == CROSS_PHASE_METRICS


def test_per_phase_figures_are_read_by_their_figures_entry() -> None:
    from harness.records.metric_definitions import ACCEPT_RATE, PHASE_ONLY, figure
    from harness.report._format import metric_label

    assert figure("ttft_ms_p50@after") is metric("ttft_ms_p50")
    assert figure("accept_rate@pressure") is ACCEPT_RATE
    assert figure("accept_rate") is None  # exists only per phase
    assert figure("no_such@after") is None
    assert set(PHASE_ONLY).isdisjoint(METRICS)
    # The report's words are the registry's, per phase too; an unknown name is shown as it is.
    assert metric_label("accept_length") == "Acceptance length (measured requests) (tokens/step)"
    assert metric_label("cache_hit_rate@after") == "Prefix-cache hit rate (cached_tokens), phase after"
    assert metric_label("output_throughput_tok_s", with_unit=False) == "Output throughput"
    assert metric_label("odd_figure@x") == "odd_figure, phase x"
    assert ACCEPT_LENGTH.heading == "accept length" and metric("ttft_ms_p50").heading == "Time to first token (p50)"
    ar = rule_for("accept_rate@after")
    assert ar is not None and ar.min_effect == ACCEPT_RATE.min_effect and rule_for("accept_rate") is None


def test_compare_judges_each_phase_with_the_registrys_phase_figures() -> None:
    from pathlib import Path

    from harness.compare.runner import _phase_specs
    from harness.records.metric_definitions import PHASE_COMPARED
    from harness.scenario import load_paths

    stateful = [c for c in (case for loaded in load_paths([Path(__file__).resolve().parent.parent / "scenarios"])
                            for case in loaded.cases) if c.scenario.workload.phase_names]
    assert stateful, "no stateful seed scenario to read"
    case = stateful[0]
    specs = _phase_specs(case, {})
    assert [(s.name, s.higher_is_better, s.min_effect) for s in specs] == [
        (f"{m.name}@{phase}", m.higher_is_better, m.min_effect)
        for phase in case.scenario.workload.phase_names for m in PHASE_COMPARED]


def test_the_acceptance_rate_at_each_measured_draft_position_is_judged_per_phase() -> None:
    """Positions 1..k that a trial measured (and only those) get a verdict between builds and a nightly rule,
    with ACCEPT_RATE's direction and minimum effect."""
    from pathlib import Path

    from harness.compare.runner import _phase_specs
    from harness.records.metric_definitions import ACCEPT_RATE, figure, position_metric, position_of
    from harness.scenario import load_paths
    from harness.series.points import rule_for

    case = next(c for loaded in load_paths([Path(__file__).resolve().parent.parent / "scenarios"])
                for c in loaded.cases if c.scenario.workload.phase_names)
    measured = {f"{position_metric(k)}@after": 0.5 for k in (1, 2, 3)} | {f"{position_metric(5)}@after": 0.1}

    class _Trial:  # what _phase_specs reads of a record: its metrics
        metrics = measured

    specs = {s.name: s for s in _phase_specs(case, {"before": [_Trial()]})}  # type: ignore[list-item]
    positions = [n for n in specs if position_of(n.partition("@")[0]) is not None]
    assert positions == [f"accept_rate_pos{k}@after" for k in (1, 2, 3)]  # 5 without 4 is not a run of positions
    assert specs["accept_rate_pos2@after"].higher_is_better and specs["accept_rate_pos2@after"].min_effect == 0.02
    entry = figure("accept_rate_pos2@after")
    assert entry is not None and entry.label == f"{ACCEPT_RATE.label} at draft position 2"
    rule = rule_for("accept_rate_pos2@after")
    assert rule is not None and rule.min_effect == ACCEPT_RATE.min_effect and rule.higher_is_better
    assert rule_for("accept_rate_pos2") is None and position_of("accept_rate_pos0") is None


def test_the_step_summary_columns_are_the_compared_metrics(tmp_path) -> None:
    from harness.pytest_plugin.reporting import StepSummary

    summary = StepSummary(tmp_path / "summary.md")
    summary.rows["t.yaml::c"] = ("passed", {"outcome": "pass", "metric.accept_length": 2.5,
                                            "metric.output_throughput_tok_s": 123.0}, "ok")
    summary.rows["t.yaml::d"] = ("failed", {"outcome": "crash", "signature": "sig"}, "died")
    lines = summary.markdown().splitlines()
    assert lines[2] == "| Item | Result | Outcome | Signature | Accept length | Output tok/s | Detail |"
    assert lines[3] == "|---|---|---|---|---|---|---|"
    assert lines[4] == "| `t.yaml::c` | passed | pass | - | 2.5 | 123 | ok |"
    assert lines[5] == "| `t.yaml::d` | failed | crash | sig | - | - | died |"


def test_bisect_searches_any_registered_metric_and_names_a_wrong_one() -> None:
    import argparse

    from harness.commands.bisect import _check_target, known_metrics
    from harness.util.errors import UserError

    assert set(METRICS) <= known_metrics() and {"ready_s", "server_trial"} <= known_metrics()
    assert not set(known_metrics()) & {"accept_rate", "cache_hit_rate"}  # per phase only: NAME@PHASE
    with pytest.raises(UserError, match=r"--metric ttft: not a metric a run records \(did you mean .*ttft_ms_p50"):
        _check_target(argparse.Namespace(metric="ttft", signature=None))
