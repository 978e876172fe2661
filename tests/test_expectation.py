"""The one expectation judge: outcomes, signatures, phases, every trial, not-run roles and hypotheses."""

from __future__ import annotations

import pytest

from harness.measure.expectation import judge_role, run_holds
from harness.records.outcome import Outcome, Phase
from harness.scenario.model import Expectation
from tests.helpers import make_record

SIG = "frozen-kv-mtp-stale-out-cache-loc"


def test_a_run_holds_on_outcome_signature_and_phase() -> None:
    exp = Expectation(outcome="crash", signature=SIG, phase="warm-up")
    assert run_holds(exp, Outcome.CRASH, SIG, Phase.WARMUP)
    assert not run_holds(exp, Outcome.CRASH, SIG, Phase.WORKLOAD)
    assert not run_holds(exp, Outcome.CRASH, "other", Phase.WARMUP)
    assert not run_holds(exp, Outcome.PASS, None, Phase.WORKLOAD)
    assert run_holds(Expectation(outcome="crash", signature="unknown"), Outcome.CRASH, None, None)
    assert run_holds(Expectation(outcome=["crash", "pass"]), Outcome.PASS, None, Phase.WORKLOAD)


def test_a_role_holds_only_when_every_trial_does() -> None:
    exp = Expectation(outcome="pass")
    runs = [make_record("pass", trial=i) for i in range(4)] + [make_record("crash", signature=SIG, trial=4)]
    check = judge_role("after", exp, runs)
    assert not check.held and check.failed and (check.trials_matching, check.trials) == (4, 5)
    assert check.actual_outcome == "crash" and check.actual_signature == SIG and "4/5" in check.actual_text
    assert judge_role("after", exp, runs[:4]).held


def test_a_role_that_could_not_run_is_not_run_not_failed() -> None:
    exp = Expectation(outcome="crash", signature=SIG)
    runs = [make_record("infra", reason="pre-flight: hardware: needs 4 GPUs, found 0")] * 2
    check = judge_role("before", exp, runs)
    assert not check.held and not check.failed and check.state == "not run"
    assert check.not_run == "pre-flight: hardware: needs 4 GPUs, found 0"
    # ... unless infra was what the scenario expected.
    assert judge_role("before", Expectation(outcome="infra"), runs).held


def test_a_hypothesis_that_does_not_hold_is_an_observation() -> None:
    exp = Expectation(outcome="crash", status="hypothesis")
    check = judge_role("before", exp, [make_record("pass")])
    assert not check.held and not check.failed and check.observation and check.state == "observation"
    assert "(hypothesis)" in exp.describe()


def test_the_phase_shows_in_what_was_expected_and_got() -> None:
    exp = Expectation(outcome="crash", phase="warm-up")
    check = judge_role("before", exp, [make_record("crash", signature=SIG, phase="workload")])
    assert check.expected_outcome == "crash at warm-up" and check.actual_outcome == "crash at workload"


def test_expectation_lists_cannot_be_empty() -> None:
    with pytest.raises(ValueError, match="an empty list accepts nothing"):
        Expectation(outcome="crash", phase=[])


def test_a_role_cut_short_by_an_interrupt_is_not_run_even_after_a_passing_trial() -> None:
    """Issue 24: compare interrupted in its second trial exited 1 (a role 'failed'), not 3 (an interrupt)."""
    from harness.measure.expectation import judge_role
    from harness.scenario.model import Expectation
    from tests.helpers import make_record

    runs = [make_record("pass", trial=0), make_record("interrupted", trial=1, reason="interrupted (SIGINT)")]
    check = judge_role("after", Expectation(outcome="pass"), runs)
    assert not check.held and check.not_run == "interrupted (SIGINT)"
    # Every trial passed: held, nothing "not run".
    ok = judge_role("after", Expectation(outcome="pass"), runs[:1])
    assert ok.held and ok.not_run == ""
