"""Judged trials for tests of the layers above a run (expectations, comparisons, reports)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from harness.compare.verdicts import RoleResult
from harness.expectations.judge import ExpectationCheck, judge_role
from harness.scenario.model import Expectation
from tests.helpers import make_record


def judged(roles: Sequence[RoleResult], expected: Mapping[str, tuple[str, str | None]]) -> list[ExpectationCheck]:
    """The one judge (harness.expectations.judge) over the trials a RoleResult summarises."""
    by_name = {r.role: r for r in roles}
    out = []
    for role, (outcome, signature) in expected.items():
        result = by_name[role]
        sigs = result.signatures or (None,) * result.trials
        runs = [make_record(o.value, signature=s, role=role, trial=i, phase=None, metrics={})
                for i, (o, s) in enumerate(zip(result.outcomes, sigs))]
        out.append(judge_role(role, Expectation(outcome=outcome, signature=signature), runs))  # type: ignore[arg-type]
    return out
