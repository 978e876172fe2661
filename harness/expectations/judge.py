"""What a scenario expects of a build role, and the one judge of whether it held.

An expectation (``expect.<role>`` in a scenario) names the outcome(s) a role should end in, optionally
the crash signature(s) and the phase (``warm-up``, ``workload``...) where it should arise, and how sure
the scenario is of it: ``confirmed`` (an upstream log or a run showed it) or ``hypothesis``.

Rules:

- one run holds an expectation when its outcome is one of the expected ones, its signature is one of
  the expected ones (when named; ``unknown`` for a crash that matched nothing), and its phase is one of
  the expected ones (when named);
- a role holds it only when every trial does: a fix that still crashes one trial in five has not held;
- a role whose trials could not even try (every trial infra or interrupted, when neither was expected) is
  *not run*: it is reported with the reason, never as an expectation that failed; so is a role one of whose
  trials was interrupted (the comparison was cut short), even if an earlier trial passed;
- a hypothesis that does not hold is an observation, never a failure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.records.outcome import NOT_TRIED, SIGNED, Outcome, Phase, most_telling
from harness.records.run_record import ExpectationResult, RunRecord
from harness.scenario.model import Expectation

__all__ = ["ExpectationCheck", "judge_role", "judge_run", "premise_gap", "run_holds"]

def premise_gap(exp: Expectation, profile: Mapping[str, Any] | None) -> str | None:
    """Why the build a run used is not the one ``exp`` is about (its ``profile:`` premise), or None."""
    return exp.profile.mismatch(dict(profile) if profile is not None else None) if exp.profile is not None else None


def run_holds(exp: Expectation, outcome: Outcome, signature: str | None, phase: Phase | None,
              profile: Mapping[str, Any] | None = None) -> bool:
    """Whether one run's outcome, signature and phase are what ``exp`` expects, on a build whose profile says
    what ``exp.profile`` states (when it states anything)."""
    if premise_gap(exp, profile) is not None:
        return False
    if outcome.value not in exp.outcomes:
        return False
    if outcome in SIGNED and exp.signatures and (signature or "unknown") not in exp.signatures:
        return False
    return not exp.phases or (phase is not None and phase.value in exp.phases)


def judge_run(role: str, exp: Expectation, outcome: Outcome, signature: str | None,
              phase: Phase | None, profile: Mapping[str, Any] | None = None) -> ExpectationResult:
    return ExpectationResult(role=role, expected=exp.describe(),
                             held=run_holds(exp, outcome, signature, phase, profile), status=exp.status,
                             premise=premise_gap(exp, profile) or "")


@dataclass(frozen=True)
class ExpectationCheck:
    """Whether one role behaved as the scenario expects (or a relative check between roles held)."""

    role: str
    expected_outcome: str
    expected_signature: str | None
    actual_outcome: str
    actual_signature: str | None
    held: bool
    trials_matching: int = 0
    trials: int = 0
    status: str = "confirmed"  # confirmed | hypothesis
    not_run: str = ""  # why the role could not even try; empty when it did
    premise: str = ""  # why a trial's build is not the one the expectation's profile: describes; empty when it is

    @property
    def failed(self) -> bool:
        """A confirmed expectation that was tried and did not hold: what makes a comparison exit 1."""
        return not self.held and not self.not_run and self.status == "confirmed"

    @property
    def observation(self) -> bool:
        """A hypothesis that did not hold: reported, never failed."""
        return not self.held and not self.not_run and self.status == "hypothesis"

    @property
    def expected_text(self) -> str:
        return f"{self.expected_outcome} {self.expected_signature}" if self.expected_signature else self.expected_outcome

    @property
    def actual_text(self) -> str:
        if self.not_run:
            return f"not run: {self.not_run}"
        text = f"{self.actual_outcome} {self.actual_signature}" if self.actual_signature else self.actual_outcome
        if self.trials and self.trials_matching not in (0, self.trials):
            text += f" ({self.trials_matching}/{self.trials} trials as expected)"
        if self.premise:
            text += f"; but {self.premise}"
        return text

    @property
    def state(self) -> str:
        """One word for reports: held, NOT HELD, observation (a hypothesis that did not hold), not run."""
        if self.held:
            return "held"
        if self.not_run:
            return "not run"
        return "observation" if self.status == "hypothesis" else "NOT HELD"

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "expected_outcome": self.expected_outcome,
            "expected_signature": self.expected_signature,
            "actual_outcome": self.actual_outcome,
            "actual_signature": self.actual_signature,
            "held": self.held,
            "trials_matching": self.trials_matching,
            "trials": self.trials,
            "status": self.status,
            "not_run": self.not_run,
            "premise": self.premise,
            "state": self.state,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExpectationCheck:
        return cls(
            role=data["role"],
            expected_outcome=data["expected_outcome"],
            expected_signature=data.get("expected_signature"),
            actual_outcome=data["actual_outcome"],
            actual_signature=data.get("actual_signature"),
            held=bool(data["held"]),
            trials_matching=int(data.get("trials_matching", 0)),
            trials=int(data.get("trials", 0)),
            status=str(data.get("status", "confirmed")),
            not_run=str(data.get("not_run", "")),
            premise=str(data.get("premise", "")),
        )


def judge_role(role: str, exp: Expectation, runs: Sequence[RunRecord]) -> ExpectationCheck:
    """Judge every trial of one role against ``exp`` (see the module docstring for the rules)."""
    matching = sum(1 for r in runs if run_holds(exp, r.outcome, r.signature, r.phase, r.build.profile))
    premise = next((gap for r in runs if (gap := premise_gap(exp, r.build.profile))), "")
    held = bool(runs) and matching == len(runs)
    outcome = most_telling(r.outcome for r in runs) if runs else Outcome.INFRA
    signature = next((r.signature for r in runs if r.signature), None)
    not_run = ""
    expected_not_tried = any(o.value in exp.outcomes for o in NOT_TRIED)
    interrupted = next((r for r in runs if r.outcome is Outcome.INTERRUPTED), None)
    if not held and not expected_not_tried and (not runs or all(r.outcome in NOT_TRIED for r in runs)):
        not_run = runs[0].reason if runs else "no trial ran"
    elif not held and not expected_not_tried and interrupted is not None:
        # An interrupted trial cut the role short: what ran does not decide it (exit 3, as any interrupt),
        # even when an earlier trial passed.
        not_run = interrupted.reason
    phase = next((r.phase for r in runs if r.phase and r.outcome is outcome), None)
    expected = "|".join(exp.outcomes) + (f" at {'|'.join(exp.phases)}" if exp.phases else "")
    if exp.profile is not None:
        expected += f" (profile: {exp.profile.describe()})"
    actual = outcome.value + (f" at {phase.value}" if exp.phases and phase else "")
    return ExpectationCheck(
        role=role,
        expected_outcome=expected,
        expected_signature="|".join(exp.signatures) or None,
        actual_outcome=actual,
        actual_signature=signature,
        held=held,
        trials_matching=matching,
        trials=len(runs),
        status=exp.status,
        not_run=not_run,
        premise=premise,
    )
