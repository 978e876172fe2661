"""Before any search: both endpoints are run and must show the claimed difference.

Signature mode: the bad endpoint must show a catalogued bug signature (``--signature``, else the
one it shows most often) and the good endpoint must not show it in as many clean trials as the
crash rate at the bad endpoint calls for. Metric mode: both endpoints pass ``trials`` times and
their samples differ by at least the threshold with Welch's p < alpha. Otherwise nothing is
searched: ``EndpointError`` says what was seen.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.bisect.oracle import Limits, Target, Trial, Verdict, decide
from harness.bisect.sequential import endpoint_difference, without_stalls
from harness.records.outcome import UNDECIDED, Outcome
from harness.signatures.catalogue import Catalogue
from harness.util.errors import EXIT_FAIL, HarnessError, InfraError

__all__ = ["EndpointError", "Endpoints", "establish"]

TrialsAt = Callable[[str, int], list[Trial]]  # (which endpoint: "good" | "bad", how many) -> trials


class EndpointError(HarnessError):
    """The endpoints do not show the claimed difference: nothing was searched."""

    exit_code = EXIT_FAIL


@dataclass(frozen=True)
class Endpoints:
    target: Target
    good: tuple[Trial, ...]
    bad: tuple[Trial, ...]
    good_reason: str
    bad_reason: str


def _seen(trials: Sequence[Trial]) -> str:
    return ", ".join(f"{t.outcome.value}{'/' + t.signature if t.signature else ''}" for t in trials) or "nothing"


def _bug_signatures(trials: Sequence[Trial], catalogue: Catalogue) -> Counter[str]:
    kinds = {s.id: s.kind for s in catalogue.signatures}
    return Counter(t.signature for t in trials if t.outcome is Outcome.CRASH and t.signature
                   and kinds.get(t.signature) == "bug")


def _all_infra(trials: Sequence[Trial], which: str) -> None:
    infra = [t for t in trials if t.outcome in UNDECIDED]
    if infra and len(infra) == len(trials):
        raise InfraError(f"the {which} endpoint could not be tried: {infra[-1].reason}")


def establish(trials_at: TrialsAt, *, signature: str | None, metric: str | None, threshold: float,
              limits: Limits, catalogue: Catalogue) -> Endpoints:
    n = limits.trials
    bad = trials_at("bad", n)
    _all_infra(bad, "bad")
    if metric is None:
        seen = _bug_signatures(bad, catalogue)
        wanted = signature or (seen.most_common(1)[0][0] if seen else None)
        if wanted is None or seen.get(wanted, 0) == 0:
            what = f"signature {signature}" if signature else "a catalogued bug signature"
            raise EndpointError(f"the bad endpoint did not show {what} in {len(bad)} trials (saw: {_seen(bad)}); "
                                "nothing searched")
        rate = seen[wanted] / len(bad)
        target = Target(signature=wanted, crash_rate=rate)
        bad_decision = decide(bad, target, limits)
        assert bad_decision is not None and bad_decision.verdict is Verdict.BAD
        good = trials_at("good", n)
        _all_infra(good, "good")
        good_decision = decide(good, target, limits, min_trials=n)
        while good_decision is None and len(good) < limits.max_trials:
            good = good + trials_at("good", len(good) + 1)[len(good):]
            good_decision = decide(good, target, limits, min_trials=n)
        if good_decision is None or good_decision.verdict is not Verdict.GOOD:
            why = good_decision.reason if good_decision else "undecided"
            raise EndpointError(f"the good endpoint is not good for {wanted}: {why} (saw: {_seen(good)}); "
                                "nothing searched")
        return Endpoints(target, tuple(good), tuple(bad), good_decision.reason, bad_decision.reason)
    good = trials_at("good", n)
    _all_infra(good, "good")

    def samples(trials: Sequence[Trial], which: str) -> tuple[float, ...]:
        values = tuple(v for t in trials if t.outcome is Outcome.PASS for v in [t.value(metric)] if v is not None)
        if len(values) < 2:
            raise EndpointError(f"the {which} endpoint gave {len(values)} {metric} samples in {len(trials)} trials "
                                f"(saw: {_seen(trials)}); need >= 2 passing trials; nothing searched")
        return values

    good_s, bad_s = without_stalls(samples(good, "good")), without_stalls(samples(bad, "bad"))
    rel, p = endpoint_difference(good_s, bad_s)
    # Not yet clear: one more trial at each endpoint, up to max_trials (a load swing on a shared machine
    # can blur a few samples; it cannot sustain a difference over many).
    while (abs(rel) < threshold or p >= limits.alpha) and max(len(good), len(bad)) < limits.max_trials:
        good, bad = trials_at("good", len(good) + 1), trials_at("bad", len(bad) + 1)
        good_s, bad_s = without_stalls(samples(good, "good")), without_stalls(samples(bad, "bad"))
        rel, p = endpoint_difference(good_s, bad_s)
    if abs(rel) < threshold or p >= limits.alpha:
        raise EndpointError(f"the endpoints do not differ in {metric}: good {_fmt(good_s)}, bad {_fmt(bad_s)} "
                            f"(change {rel:+.1%}, Welch p={p:.3g}; need |change| >= {threshold:.1%} and "
                            f"p < {limits.alpha}); nothing searched")
    target = Target(metric=metric, good_samples=good_s, bad_samples=bad_s)
    why = f"{metric} {rel:+.1%} from good to bad (Welch p={p:.2g})"
    return Endpoints(target, tuple(good), tuple(bad), f"{metric} {_fmt(good_s)}; {why}", f"{metric} {_fmt(bad_s)}")


def _fmt(values: Sequence[float]) -> str:
    return "[" + ", ".join(f"{v:.4g}" for v in values) + "]"
