"""The bisection oracle: is a revision good, bad, or can it not tell (skip)?

``git bisect run``'s contract (0 good, 1 bad, 125 skip) is applied by the caller through the
search's terms; this module decides which *endpoint* a revision behaves like:

- signature mode: BAD when a trial shows the searched signature (one sighting proves it is there);
  GOOD after enough clean trials (pass or fail: the workload ran and the signature did not show)
  that a crash as frequent as at the bad endpoint would have shown with probability >= 1 - alpha.
  Another signature, an unknown crash or a timeout is inconclusive (the server may have died
  before the searched code ran): another trial, and after ``max_inconclusive`` of them a skip.
  An infra outcome (the build does not install, the revision's parser rejects a flag, a missing
  model) is a skip at once: it is a property of the revision and of the host, not of the bug.
- metric mode: the samples of passing trials go through a sequential test against the pooled
  samples of both endpoints (``harness.bisect.sequential``); undecided after ``max_trials``: skip.

``decide`` is pure (trials in, a decision or "one more trial" out); ``judge`` runs trials until
``decide`` answers, starting from trials already known (run records in the store).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.bisect.sequential import Side, sequential_test, without_stalls
from harness.records.outcome import MEASURED, Outcome
from harness.records.run_record import RunRecord
from harness.util.str_enum import StrEnum

__all__ = [
    "Find",
    "Decision",
    "Limits",
    "Target",
    "Trial",
    "Verdict",
    "clean_trials_needed",
    "decide",
    "judge",
    "trial_from_record",
]


class Verdict(StrEnum):
    GOOD = "good"  # behaves like the good endpoint of a regression (the bug is absent)
    BAD = "bad"  # shows the searched bug
    SKIP = "skip"  # cannot tell


class Find(StrEnum):
    """What a bisection looks for: the change that brought the failure in, or the one that took it away."""

    REGRESSION = "regression"  # old is good, new is bad
    FIX = "fix"  # old is broken, new is fixed

    @property
    def new_verdict(self) -> Verdict:
        """The verdict of the newer side in git's terms: bad for a regression, good for a fix."""
        return Verdict.BAD if self is Find.REGRESSION else Verdict.GOOD


@dataclass(frozen=True)
class Trial:
    """What the oracle keeps of one run."""

    outcome: Outcome
    signature: str | None
    reason: str
    phase: str | None = None
    metrics: Mapping[str, float] | None = None
    artifacts: str = ""
    duration_s: float = 0.0
    server: str = ""  # the run tag of the server it ran on (trials of one revision may share one); "" for none

    @property
    def launched(self) -> bool:
        """Whether it ran on a server (an infra outcome is counted as never started)."""
        return self.outcome is not Outcome.INFRA

    def value(self, metric: str) -> float | None:
        v = (self.metrics or {}).get(metric)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome.value, "signature": self.signature, "reason": self.reason,
                "phase": self.phase, "metrics": dict(self.metrics or {}), "artifacts": self.artifacts,
                "duration_s": self.duration_s, "server": self.server}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Trial:
        return cls(Outcome(data["outcome"]), data.get("signature"), str(data.get("reason") or ""),
                   data.get("phase"), dict(data.get("metrics") or {}), str(data.get("artifacts") or ""),
                   float(data.get("duration_s") or 0.0), str(data.get("server") or ""))


def trial_from_record(record: RunRecord) -> Trial:
    """A trial from a run record: what the oracle weighs of it (an infra run never had a server)."""
    metrics = {str(k): float(v) for k, v in record.metrics.items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)}
    server = record.server.run_tag if record.outcome is not Outcome.INFRA else ""
    return Trial(record.outcome, record.signature, record.reason, record.phase.value if record.phase else None,
                 metrics, record.artifacts, record.duration_s, server)


@dataclass(frozen=True)
class Target:
    """What is searched: a signature, or a metric with both endpoints' samples."""

    signature: str | None = None
    metric: str | None = None
    good_samples: tuple[float, ...] = ()
    bad_samples: tuple[float, ...] = ()
    crash_rate: float = 1.0  # share of the bad endpoint's trials that showed the signature

    def describe(self) -> str:
        if self.metric:
            return f"metric {self.metric}"
        return f"signature {self.signature}"


@dataclass(frozen=True)
class Limits:
    trials: int = 3  # per endpoint
    max_trials: int = 8  # per step
    max_inconclusive: int = 5
    confirm_trials: int = 3  # extra trials for the culprit and its parent
    alpha: float = 0.01


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str
    trials: tuple[Trial, ...]
    log_ratio: float | None = None


def clean_trials_needed(crash_rate: float, alpha: float) -> int:
    """Clean trials after which a crash of this rate would have shown with probability >= 1 - alpha."""
    if crash_rate >= 1.0:
        return 1
    if crash_rate <= 0.0:
        return 10**6
    return max(1, math.ceil(math.log(alpha) / math.log(1.0 - crash_rate)))


def _inconclusive(t: Trial) -> str:
    if t.outcome is Outcome.CRASH:
        return f"other signature {t.signature}" if t.signature and t.signature != "unknown" else "unknown crash"
    return t.outcome.value


def decide(trials: Sequence[Trial], target: Target, limits: Limits, *, min_trials: int = 1) -> Decision | None:
    """The oracle's decision on these trials, or None when one more trial is needed."""
    done = tuple(trials)
    if target.signature:
        hits = [i for i, t in enumerate(done) if t.outcome is Outcome.CRASH and t.signature == target.signature]
        if hits and len(done) >= min_trials:
            return Decision(Verdict.BAD, f"{target.signature} in {len(hits)} of {len(done)} trials", done)
    infra = next((t for t in done if t.outcome is Outcome.INFRA), None)
    if infra is not None:
        return Decision(Verdict.SKIP, f"infra: {infra.reason}", done)
    inconclusive = [t for t in done if t.outcome not in MEASURED
                    and not (target.signature and t.signature == target.signature)]
    if target.signature:
        clean = len(done) - len(inconclusive)
        needed = max(min_trials, clean_trials_needed(target.crash_rate, limits.alpha))
        if clean >= needed and len(done) >= min_trials:
            return Decision(Verdict.GOOD, f"{target.signature} absent in {clean} clean trial{'s' if clean != 1 else ''}",
                            done)
    else:
        assert target.metric
        raw = [v for t in done if t.outcome in MEASURED
               for v in [t.value(target.metric)] if v is not None]
        samples = without_stalls(raw)
        # At least 3 samples: one stalled trial must not decide a step (later trials share the server: cheap).
        if len(raw) >= min(3, limits.max_trials) and len(done) >= min_trials:
            test = sequential_test(samples, target.good_samples, target.bad_samples, alpha=limits.alpha,
                                   beta=limits.alpha)
            values = ", ".join(f"{v:.4g}" for v in samples)
            if test.side is not Side.UNDECIDED:
                verdict = Verdict.BAD if test.side is Side.BAD else Verdict.GOOD
                return Decision(verdict, f"{target.metric} [{values}] like the {test.side.value} endpoint "
                                         f"(log-ratio {test.log_ratio:+.1f})", done, test.log_ratio)
    if len(inconclusive) >= limits.max_inconclusive:
        kinds = sorted({_inconclusive(t) for t in inconclusive})
        return Decision(Verdict.SKIP, f"inconclusive in {len(inconclusive)} trials ({'; '.join(kinds)}): "
                                      f"{inconclusive[-1].reason[:200]}", done)
    if len(done) >= limits.max_trials:
        return Decision(Verdict.SKIP, f"undecided after {len(done)} trials", done)
    return None


def judge(
    run_trial: Callable[[int], Trial],
    target: Target,
    limits: Limits,
    *,
    known: Sequence[Trial] = (),
    on_trial: Callable[[Trial], None] | None = None,
    min_trials: int = 1,
) -> Decision:
    """Run trials (numbered after the ``known`` ones) until ``decide`` answers."""
    trials = list(known)
    while True:
        decision = decide(trials, target, limits, min_trials=min_trials)
        if decision is not None:
            return decision
        trial = run_trial(len(trials))
        trials.append(trial)
        if on_trial is not None:
            on_trial(trial)
