"""Deciding a run's outcome from what happened, and the record of one run (``result.json``).

Precedence, first that applies: infra (could not even try) > crash (the server died, or logged a
known signature; an infra-kind signature such as "address already in use" makes it infra) >
timeout (a bound was reached) > fail (a check did not hold) > pass.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from harness.scenario.model import Checks

__all__ = ["OUTCOME_EXIT", "RESULT_SCHEMA_VERSION", "RunResult", "Verdict", "evaluate_checks", "exit_code_for"]

RESULT_SCHEMA_VERSION = 1
# design.md: run exits 0 pass, 1 fail or crash, 3 infra or timeout.
OUTCOME_EXIT = {"pass": 0, "fail": 1, "crash": 1, "infra": 3, "timeout": 3}
_SEVERITY = {"pass": 0, "fail": 1, "crash": 2, "timeout": 3, "infra": 4}


@dataclass(frozen=True)
class Verdict:
    outcome: str
    signature: str | None
    reason: str
    excerpt: str = ""  # the crash's log lines (traceback), already redacted


def exit_code_for(outcomes: list[str]) -> int:
    """The exit code of several runs: that of the worst outcome (infra/timeout beat crash/fail)."""
    if not outcomes:
        return 0
    return OUTCOME_EXIT[max(outcomes, key=lambda o: _SEVERITY[o])]


def evaluate_checks(checks: Checks, metrics: dict[str, Any]) -> list[str]:
    """The checks of one run that did not hold, as short phrases (empty: all held).

    ``checks.relative`` needs a baseline run and is evaluated by ``compare``, not here.
    """
    failed = []
    ok, bad = metrics.get("requests_ok") or 0, metrics.get("requests_failed") or 0
    if checks.all_requests_succeed and (bad or not ok):
        failed.append(f"{bad} of {ok + bad} requests failed")
    if checks.accept_length is not None:
        problem = checks.accept_length.violation(metrics.get("accept_length"), "accept length")
        if problem:
            failed.append(problem)
    if checks.output_throughput is not None:
        problem = checks.output_throughput.violation(metrics.get("output_throughput_tok_s"), "output throughput tok/s")
        if problem:
            failed.append(problem)
    return failed


@dataclass(frozen=True)
class RunResult:
    """One run: one case x one build x one trial. ``to_dict`` is the ``result.json`` contract."""

    scenario: dict[str, str]
    case: dict[str, Any]
    build: dict[str, Any]
    trial: int
    outcome: str
    signature: str | None
    reason: str
    metrics: dict[str, Any]
    server: dict[str, Any]
    host: dict[str, Any]
    started_at: str
    duration_s: float
    harness_version: str
    artifacts: str
    excerpt: str = ""
    checks: list[dict[str, Any]] = field(default_factory=list)
    expectation: dict[str, Any] | None = None
    ground_truth: dict[str, Any] | None = None
    schema_version: int = RESULT_SCHEMA_VERSION

    @property
    def exit_code(self) -> int:
        return OUTCOME_EXIT[self.outcome]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})
