"""Outcomes, their named orderings and the exit codes they give."""

from __future__ import annotations

from typing import get_args

import pytest

from harness.records.outcome import (
    EXIT_ORDER,
    TELLING_ORDER,
    Outcome,
    Phase,
    exit_code_for,
    most_telling,
    parse_outcome,
)
from harness.scenario.model import ExpectedOutcome, ExpectedPhase


def test_every_ordering_covers_every_outcome_once() -> None:
    for order in (EXIT_ORDER, TELLING_ORDER):
        assert sorted(order) == sorted(Outcome) and len(set(order)) == len(order)


def test_the_scenario_format_expects_exactly_the_harness_outcomes_and_phases() -> None:
    assert set(get_args(ExpectedOutcome)) == {o.value for o in Outcome} - {"interrupted"}
    assert set(get_args(ExpectedPhase)) == {p.value for p in Phase}


@pytest.mark.parametrize(("outcomes", "code"), [
    ([], 0),
    (["pass", "pass"], 0),
    (["pass", "fail"], 1),
    (["crash", "pass"], 1),
    (["crash", "timeout"], 3),  # could not decide outweighs a decided crash
    (["infra", "fail"], 3),
    (["interrupted", "pass"], 3),
])
def test_exit_code_of_several_runs(outcomes: list[str], code: int) -> None:
    assert exit_code_for(parse_outcome(o) for o in outcomes) == code


def test_most_telling_shows_one_crash_among_passes() -> None:
    assert most_telling([Outcome.PASS] * 4 + [Outcome.CRASH]) is Outcome.CRASH
    assert most_telling([Outcome.INFRA, Outcome.TIMEOUT]) is Outcome.TIMEOUT
    assert most_telling([]) is Outcome.PASS


def test_unknown_outcome_names_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="not one of pass, fail, crash, infra, timeout, interrupted"):
        parse_outcome("boom")
