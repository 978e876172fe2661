"""Verdicts, expectations and the serialised form of a comparison, on synthetic trials."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import cast

import numpy as np
import pytest

from harness.compare.verdicts import (
    SCHEMA_VERSION,
    VERDICTS,
    ComparisonReport,
    MetricSpec,
    MetricVerdict,
    RoleResult,
    build_report,
    combine_verdicts,
    compare_case,
    compare_metric,
)
from harness.records.outcome import Outcome, parse_outcome
from harness.records.run_record import RunRecord
from tests.run_records import judged

SIG = "frozen-kv-mtp-stale-out-cache-loc"


def _normal(mean: float, sd: float, n: int, seed: int) -> list[float]:
    return list(np.random.default_rng(seed).normal(mean, sd, n))


def _role(role: str, outcomes: list[str], *, signatures=None, **metrics) -> RoleResult:
    return RoleResult(
        role=role,
        build=f"sim:{'pre' if role == 'before' else 'post'}-fix",
        build_kind="sim",
        version="sim-0.1.0",
        outcomes=tuple(parse_outcome(o) for o in outcomes),
        signatures=tuple(signatures or [None] * len(outcomes)),
        reasons=tuple("" if o == "pass" else f"server {o}" for o in outcomes),
        metrics={k: tuple(v) for k, v in metrics.items()},
        artifact_dirs=tuple(f"../../runs/{role}-{i}" for i in range(len(outcomes))),
        reference_server=True,
    )


def test_double_step_cost_is_worse_with_a_small_p():
    # A 2x per-step cost roughly halves output throughput; per-trial noise of a few percent.
    before = _normal(1200, 40, 6, seed=1)
    after = _normal(600, 25, 6, seed=2)
    m = compare_metric("output_throughput_tok_s", before, after, min_effect=0.05)
    assert m.verdict == "worse"
    assert m.p_value < 0.01
    assert m.ci_high < 0 and m.delta_rel == pytest.approx(np.mean(after) / np.mean(before) - 1)


def test_clear_improvement_is_better():
    m = compare_metric("accept_length", _normal(2.0, 0.05, 8, seed=3), _normal(2.6, 0.05, 8, seed=4))
    assert m.verdict == "better" and m.p_value < 0.01 and m.ci_low > 0


def test_lower_is_better_turns_the_direction():
    before, after = _normal(100, 3, 6, seed=5), _normal(70, 3, 6, seed=6)
    assert compare_metric("ttft_ms_p50", before, after, higher_is_better=False).verdict == "better"
    assert compare_metric("ttft_ms_p50", after, before, higher_is_better=False).verdict == "worse"


@pytest.mark.parametrize("seed", range(5))
def test_one_distribution_is_same(seed):
    m = compare_metric("accept_length", _normal(2.4, 0.1, 10, seed=100 + seed), _normal(2.4, 0.1, 10, seed=200 + seed))
    assert m.verdict == "same"
    assert m.p_value > 0.01


def test_identical_deterministic_values_are_same():
    m = compare_metric("accept_length", [2.5] * 5, [2.5] * 5)
    assert (m.verdict, m.p_value, m.delta_rel) == ("same", 1.0, 0.0)


def test_too_few_samples_is_not_enough_data():
    m = compare_metric("accept_length", [2.0, 2.1], [3.0, 3.1, 3.2])
    assert m.verdict == "not enough data"
    assert "need 3" in m.note
    assert math.isfinite(m.delta_rel)  # still computed for the reader


def test_trials_that_cannot_reach_alpha_are_not_enough_data():
    # 4 vs 4 completely separated trials: the smallest possible p is 2/70 > 0.01.
    m = compare_metric("output_throughput_tok_s", [1000, 1010, 990, 1005], [500, 505, 495, 498])
    assert m.verdict == "not enough data"
    assert "5 trials per side" in m.note
    # With a looser alpha the same data is enough.
    assert compare_metric(
        "output_throughput_tok_s", [1000, 1010, 990, 1005], [500, 505, 495, 498], alpha=0.05
    ).verdict == "worse"


def test_significant_but_tiny_change_is_same():
    before = _normal(1000.0, 0.5, 10, seed=7)
    after = [v * 1.01 for v in _normal(1000.0, 0.5, 10, seed=8)]
    m = compare_metric("output_throughput_tok_s", before, after, min_effect=0.05)
    assert m.p_value < 0.01 and m.ci_low > 0
    assert m.verdict == "same" and "minimum effect" in m.note
    assert compare_metric("output_throughput_tok_s", before, after, min_effect=0.005).verdict == "better"


def test_missing_values_are_dropped():
    m = compare_metric("accept_length", [2.0, None, math.nan, 2.1, 2.0], [2.0, 2.1, 2.0])
    assert m.before == (2.0, 2.1, 2.0)
    assert m.verdict == "not enough data"  # 3 vs 3 cannot reach 0.01


def test_zero_baseline_is_not_enough_data():
    m = compare_metric("output_throughput_tok_s", [0.0] * 6, [5.0] * 6)
    assert m.verdict == "not enough data" and "is 0" in m.note


def test_role_result_validates_outcomes_and_alignment():
    with pytest.raises(ValueError, match="outcome"):  # as from untyped data (a JSON file): RoleResult parses them
        RoleResult("before", "sim:pre-fix", "sim", "sim-0.1.0", cast("tuple[Outcome, ...]", ("pass", "boom")))
    with pytest.raises(ValueError, match="3 entries for 2 trials"):
        _role("before", ["pass", "pass"], accept_length=[1.0, 2.0, 3.0])


def test_role_labels_the_reference_server():
    assert "reference server (CPU model, not SGLang)" in _role("before", ["pass"]).build_label
    real = RoleResult("after", "pip:sglang==0.5.15", "pip", "0.5.15", (Outcome.PASS,))
    assert real.build_label == "pip:sglang==0.5.15" and not real.is_reference_server


def test_compare_case_uses_only_passing_trials():
    before = _role(
        "before",
        ["pass"] * 6 + ["crash"],
        signatures=[None] * 6 + [SIG],
        output_throughput_tok_s=_normal(1200, 30, 6, seed=9) + [5.0],
        accept_length=[2.5] * 6 + [math.nan],
    )
    after = _role(
        "after", ["pass"] * 6, output_throughput_tok_s=_normal(600, 20, 6, seed=10), accept_length=[2.5] * 6
    )
    case = compare_case("c1", {"num_steps": 1}, [before, after], judged([before, after], {"after": ("pass", None)}))
    by_metric = {m.metric: m for m in case.metrics}
    assert len(by_metric["output_throughput_tok_s"].before) == 6
    assert by_metric["output_throughput_tok_s"].verdict == "worse"
    assert by_metric["accept_length"].verdict == "same"
    assert case.verdict == "worse" and case.expectations_held


def test_crash_before_pass_after_holds_and_has_no_performance_verdict():
    before = _role("before", ["crash"] * 5, signatures=[SIG] * 5)
    after = _role("after", ["pass"] * 5, accept_length=[2.4, 2.5, 2.45, 2.5, 2.4])
    case = compare_case("c", {}, [before, after], judged([before, after], {"before": ("crash", SIG), "after": ("pass", None)}))
    assert case.expectations_held and all(e.held for e in case.expectations)
    assert case.verdict == "not enough data"
    assert all("before: 0" in m.note for m in case.metrics)


def test_more_roles_compare_against_the_first():
    roles = [_role(r, ["pass"] * 5, accept_length=[2.0 + i] * 5) for i, r in enumerate(["before", "a", "b"])]
    case = compare_case("c", {}, roles, metrics=[MetricSpec("accept_length", "Acceptance length")])
    assert [(m.before_role, m.after_role, m.verdict) for m in case.metrics] == [
        ("before", "a", "better"),
        ("before", "b", "better"),
    ]


def test_combine_verdicts_prefers_regressions():
    assert combine_verdicts(["better", "worse", "same"]) == "worse"
    assert combine_verdicts(["same", "better"]) == "better"
    assert combine_verdicts(["not enough data", "same"]) == "same"
    assert combine_verdicts([]) == "not enough data"
    assert combine_verdicts([MetricVerdict.SAME, "better"]) is MetricVerdict.BETTER


def test_verdicts_are_one_enum_serialised_as_the_words_of_before() -> None:
    assert VERDICTS == ("better", "same", "worse", "not enough data")
    assert [str(v) for v in MetricVerdict] == list(VERDICTS)
    assert [f"{v}" for v in MetricVerdict] == list(VERDICTS)  # f-strings in reports and the summary
    with pytest.raises(ValueError, match="'improved'"):
        MetricVerdict("improved")  # a stored word the harness never wrote is refused, not carried along
    report = _report()
    case = report.cases[0]
    assert case.verdict is MetricVerdict.NOT_ENOUGH_DATA and report.verdict is MetricVerdict.NOT_ENOUGH_DATA
    assert all(isinstance(m.verdict, MetricVerdict) for m in case.metrics)
    data = report.to_dict()
    # Plain strings in comparison.json (not the enum), so the file reads as before on any reader.
    assert type(data["verdict"]) is str and type(data["cases"][0]["verdict"]) is str
    assert {type(m["verdict"]) for m in data["cases"][0]["metrics"]} == {str}
    again = ComparisonReport.from_dict(json.loads(json.dumps(data)))
    assert again.cases[0].verdict is MetricVerdict.NOT_ENOUGH_DATA
    assert all(m.verdict is MetricVerdict.NOT_ENOUGH_DATA for m in again.cases[0].metrics)


def _report() -> ComparisonReport:
    before = _role("before", ["crash", "pass", "pass"], signatures=[SIG, None, None], accept_length=[math.nan, 2.0, 2.1])
    after = _role("after", ["pass"] * 3, accept_length=[2.0, 2.1, 2.05])
    case = compare_case("num_steps=1", {"num_steps": 1}, [before, after], judged([before, after], {"before": ("crash", SIG)}))
    return build_report("20260701-abc", "frozen-kv-mtp", "scenarios/x.yaml", [case], notes=["a note"])


def test_report_round_trips_through_strict_json():
    report = _report()
    text = json.dumps(report.to_dict(), allow_nan=False)
    data = json.loads(text)
    assert data["schema_version"] == SCHEMA_VERSION
    role = data["cases"][0]["roles"][0]
    assert role["outcome"] == "crash" and role["signature"] == SIG
    assert role["metrics"]["accept_length"][0] is None
    assert data["cases"][0]["metrics"][0]["verdict"] == "not enough data"
    again = ComparisonReport.from_dict(data)
    assert again.to_dict() == report.to_dict()
    assert not again.all_expectations_held  # one trial of "before" passed


def test_unknown_schema_version_is_refused():
    data = _report().to_dict()
    data["schema_version"] = 99
    with pytest.raises(ValueError, match="schema_version 99"):
        ComparisonReport.from_dict(data)


def test_a_simsrc_role_keeps_the_reference_server_label_from_its_record(tmp_path: Path) -> None:
    from harness.compare.runner import _role_result
    from harness.records.run_record import record_from_dict

    def record(kind: str, spec: str, reference: bool) -> RunRecord:
        return record_from_dict({
            "scenario": {"name": "s", "file": "s.yaml"}, "case": {"name": "c", "values": {}},
            "build": {"kind": kind, "spec": spec, "role": "after", "reference_server": reference}, "trial": 0,
            "outcome": "pass", "reason": "ok", "metrics": {}, "artifacts": str(tmp_path / "runs" / kind),
        })

    simsrc = _role_result("after", "simsrc:/src@abc", [record("simsrc", "simsrc:/src@abc", True)], tmp_path)
    assert simsrc.is_reference_server and "reference server (CPU model, not SGLang)" in simsrc.build_label
    assert RoleResult.from_dict(simsrc.to_dict()).is_reference_server
    pip = _role_result("after", "pip:sglang==0.5.15", [record("pip", "pip:sglang==0.5.15", False)], tmp_path)
    assert not pip.is_reference_server and pip.build_label == "pip:sglang==0.5.15"
