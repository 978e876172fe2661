"""A run's absolute checks (harness.pipeline.evaluate_checks) and the relative ones between roles (compare)."""

from __future__ import annotations

import math

from harness.compare.runner import _relative_checks
from harness.compare.verdicts import MetricComparison, MetricVerdict
from harness.pipeline import evaluate_checks
from harness.scenario.model import Bound, Checks, RelativeChecks


def test_absolute_checks_say_which_held() -> None:
    # A plain Bound built in code bounds the requests' own figure (Checks._plain_bound turns it into one).
    checks = Checks.model_validate({"accept_length": Bound(min=1.5), "output_throughput": Bound(min=10.0, max=100.0)})
    results = evaluate_checks(checks, {"requests_ok": 4, "requests_failed": 0, "accept_length": 1.4,
                                       "output_throughput_tok_s": 50.0})
    held = {r.check: r.held for r in results}
    assert held == {"all requests succeed": True, "accept length within bounds": False,
                    "output throughput tok/s within bounds": True}
    assert "1.4" in next(r.detail for r in results if not r.held)


def test_no_successful_request_fails_the_request_check() -> None:
    [result] = evaluate_checks(Checks(), {"requests_ok": 0, "requests_failed": 0})
    assert not result.held and "0 of 0" in result.detail
    [result] = evaluate_checks(Checks(), {"requests_ok": 3, "requests_failed": 1})
    assert not result.held and "1 of 4" in result.detail


def _metric(name: str, delta: float, verdict: str) -> MetricComparison:
    return MetricComparison(metric=name, higher_is_better=True, before=(1.0,) * 5, after=(1.0 + delta,) * 5,
                            delta_rel=delta, ci_low=delta - 0.01, ci_high=delta + 0.01, p_value=0.001,
                            min_effect=0.02, verdict=MetricVerdict(verdict))


class _Case:
    def __init__(self, *metrics: MetricComparison) -> None:
        self.metrics = metrics


def test_relative_checks_fail_only_on_a_significant_drop_beyond_the_tolerance() -> None:
    rel = RelativeChecks(baseline="before", accept_length_max_regression=0.05,
                         output_throughput_max_regression=0.10)
    small = _relative_checks(rel, _Case(_metric("accept_length", -0.03, "worse")))  # type: ignore[arg-type]
    big = _relative_checks(rel, _Case(_metric("accept_length", -0.08, "worse")))  # type: ignore[arg-type]
    noise = _relative_checks(rel, _Case(_metric("output_throughput_tok_s", -0.2, "same")))  # type: ignore[arg-type]
    assert [c.held for c in small] == [True]
    assert [c.held for c in big] == [False] and big[0].failed and "-8.0%" in big[0].actual_outcome
    assert [c.held for c in noise] == [True]
    unknown = _relative_checks(rel, _Case(_metric("accept_length", math.nan, "not enough data")))  # type: ignore[arg-type]
    assert unknown[0].actual_outcome == "not enough data"
