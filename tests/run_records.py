"""Synthetic run records for tests of the layers above a run (expectations, comparisons, reports)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.compare.verdicts import RoleResult
from harness.measure.expectation import ExpectationCheck, judge_role
from harness.records.run_record import RunRecord, record_from_dict
from harness.scenario.model import Expectation


def make_record(outcome: str, *, signature: str | None = None, phase: str | None = None, role: str = "after",
                trial: int = 0, metrics: Mapping[str, Any] | None = None, reason: str = "",
                manifest: Mapping[str, Any] | None = None, profile: Mapping[str, Any] | None = None) -> RunRecord:
    build: dict[str, Any] = {"kind": "sim", "spec": "sim:post-fix", "role": role}
    if profile is not None:
        build["profile"] = dict(profile)
    return record_from_dict({
        "scenario": {"name": "s", "file": "s.yaml"}, "case": {"name": "c", "values": {}},
        "build": build, "trial": trial, "outcome": outcome,
        "signature": signature, "phase": phase, "reason": reason or outcome, "metrics": dict(metrics or {}),
        "artifacts": f"runs/{role}-{trial}", "manifest": manifest,
    })


def judged(roles: Sequence[RoleResult], expected: Mapping[str, tuple[str, str | None]]) -> list[ExpectationCheck]:
    """The one judge (harness.measure.expectation) over the trials a RoleResult summarises."""
    by_name = {r.role: r for r in roles}
    out = []
    for role, (outcome, signature) in expected.items():
        result = by_name[role]
        sigs = result.signatures or (None,) * result.trials
        runs = [make_record(o.value, signature=s, role=role, trial=i) for i, (o, s) in enumerate(zip(result.outcomes, sigs))]
        out.append(judge_role(role, Expectation(outcome=outcome, signature=signature), runs))  # type: ignore[arg-type]
    return out
