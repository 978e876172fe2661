"""The search algorithms, free of I/O: ddmin over atoms and the smallest failing value of a number.

``ddmin`` is Zeller and Hildebrandt's delta debugging ("Simplifying and Isolating Failure-Inducing
Input", TSE 2002): split the kept atoms into ``n`` chunks; keep one chunk if it alone still fails,
else drop one chunk if the rest still fails, else double ``n``; stop when ``n`` reaches the number
of atoms. The result is 1-minimal: dropping any single atom loses the failure. The caller's
``first_interesting`` receives a whole round of candidates (so it can run them in parallel) and
answers the index of the first, in order, that reproduces; candidates are "keep these atoms".

``textbook=True`` also tries the complements when ``n == 2`` (they equal the chunks), as the paper's
formulation does: what a run without a cache pays.

``smallest_failing`` finds the least value in ``[low, high]`` that still fails, given that ``high``
fails and failure is monotone: galloping up from ``low`` (1, 2, 4, ... above it) then bisecting, which
costs O(log answer) runs when the answer is small, the usual case; or plain bisection.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["DDState", "ddmin", "smallest_failing"]

T = TypeVar("T")
FirstInteresting = Callable[[Sequence[Sequence[T]]], "int | None"]


@dataclass
class DDState(Generic[T]):
    """Where ddmin is: what it keeps and at which granularity (read when a budget stops it)."""

    items: list[T]
    n: int = 2
    done: bool = False
    rounds: int = 0
    history: list[list[T]] = field(default_factory=list)


def _chunks(items: Sequence[T], n: int) -> list[list[T]]:
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(list(items[start:end]))
        start = end
    return [c for c in out if c]


def ddmin(state: DDState[T], first_interesting: FirstInteresting[T], *, textbook: bool = False) -> list[T]:
    """Shrink ``state.items`` (which fail) to a 1-minimal failing subset, updating ``state`` as it goes."""
    while len(state.items) >= 2:
        state.rounds += 1
        items, n = state.items, min(state.n, len(state.items))
        chunks = _chunks(items, n)
        hit = first_interesting(chunks)
        if hit is not None:
            state.items, state.n = chunks[hit], 2
            state.history.append(state.items)
            continue
        if n > 2 or textbook:
            complements = [[x for x in items if x not in chunk] for chunk in chunks]
            hit = first_interesting(complements)
            if hit is not None:
                state.items, state.n = complements[hit], max(n - 1, 2)
                state.history.append(state.items)
                continue
        if n >= len(items):
            break
        state.n = min(len(items), 2 * n)
    state.done = True
    return state.items


def smallest_failing(low: int, high: int, fails: Callable[[int], bool], *, gallop: bool = True) -> int:
    """The least ``v`` in ``[low, high]`` with ``fails(v)``, given ``fails(high)``; ``fails`` is asked each
    value at most once."""
    if high <= low:
        return high
    passing = low - 1  # assumed passing below the range
    if gallop:
        step, probe = 1, low
        while probe < high:
            if fails(probe):
                high = probe
                break
            passing = probe
            probe = low + step
            step *= 2
    while high - passing > 1:
        mid = (passing + high) // 2
        if fails(mid):
            high = mid
        else:
            passing = mid
    return high
