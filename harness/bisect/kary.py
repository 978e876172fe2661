"""The K-ary search of a bisection on a fleet: K revisions of the remaining range tested at once.

The range is a list of N revisions, oldest first, whose last one is the known ``new`` endpoint (the
``old`` endpoint sits before index 0). Each revision's answer is ``old``, ``new`` or ``skip`` (git's
terms: 0, 1, 125 of the oracle). A round picks K untested revisions that split the remaining range
(after the last ``old``, before the first ``new``) into K + 1 parts of about equal size, so the range
shrinks by a factor K + 1 a round: about log_(K+1) N rounds instead of log_2 N. With K = 1 this is
binary search.

Skips are answered as ``git bisect`` answers them: a skipped revision is never picked again, and when
only skipped revisions are left between the last ``old`` and the first ``new``, the first new one is
ambiguous: one of those skipped revisions or the first ``new`` itself (``candidates``). Answers that
contradict monotonicity (an ``old`` after a ``new``, possible when K revisions are judged at once) are
resolved towards the first ``new``: the range is bounded by the earliest ``new`` and the last ``old``
before it.

Pure functions over indices, no I/O: ``harness.bisect.fleet`` runs each round's revisions as jobs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = ["OLD", "NEW", "SKIP", "KaryResult", "expected_rounds", "next_round", "remaining", "result_of", "search"]

OLD, NEW, SKIP = "old", "new", "skip"


@dataclass(frozen=True)
class KaryResult:
    """Where a search ended: ``first_new`` (an index) when it is known, else ``candidates`` (indices, in order)."""

    first_new: int | None
    candidates: tuple[int, ...]
    rounds: int = 0
    tested: int = 0


def _bounds(n: int, known: Mapping[int, str]) -> tuple[int, int]:
    """(last old before the first new, first new); -1 stands for the old endpoint, n - 1 is always new."""
    hi = min([i for i, a in known.items() if a == NEW and 0 <= i < n] + [n - 1])
    lo = max([i for i, a in known.items() if a == OLD and i < hi] + [-1])
    return lo, hi


def remaining(n: int, known: Mapping[int, str]) -> list[int]:
    """The revisions strictly between the bounds that are still untested (skipped ones are left out)."""
    lo, hi = _bounds(n, known)
    return [i for i in range(lo + 1, hi) if i not in known]


def next_round(n: int, known: Mapping[int, str], k: int) -> tuple[int, ...]:
    """The (at most ``k``) revisions to test next, oldest first; () when the search is over.

    The picks are spread over the untested revisions of the range (skipped ones excluded), at the
    j/(k+1) quantiles, j = 1..k: each of the k + 1 parts the answers can leave is about 1/(k+1) of it."""
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    if n < 1:
        raise ValueError("the range has no revision")
    left = remaining(n, known)
    m = len(left)
    if m <= k:
        return tuple(left)
    picks = sorted({left[min(m - 1, max(0, math.ceil(j * (m + 1) / (k + 1)) - 1))] for j in range(1, k + 1)})
    return tuple(picks)


def result_of(n: int, known: Mapping[int, str], *, rounds: int = 0) -> KaryResult:
    """The answer once ``next_round`` is empty: the first new revision, or the candidates for it."""
    lo, hi = _bounds(n, known)
    between = [i for i in range(lo + 1, hi)]
    tested = sum(1 for i in known if 0 <= i < n - 1)
    if not between:
        return KaryResult(hi, (), rounds, tested)
    return KaryResult(None, (*between, hi), rounds, tested)


def search(n: int, k: int, oracle: Callable[[int], str], *,
           known: Mapping[int, str] | None = None) -> KaryResult:
    """The whole search with a plain oracle (index -> answer); each round's ``k`` calls happen "at once"."""
    answers = dict(known or {})
    answers[n - 1] = NEW
    rounds = 0
    while picks := next_round(n, answers, k):
        rounds += 1
        for i in picks:
            answers[i] = oracle(i)
    return result_of(n, answers, rounds=rounds)


def expected_rounds(count: int, k: int) -> int:
    """About ceil(log_(k+1) N) rounds for N revisions (N - 1 of them untested)."""
    untested = max(count - 1, 1)
    return max(1, math.ceil(math.log(untested + 1) / math.log(k + 1) - 1e-9))
