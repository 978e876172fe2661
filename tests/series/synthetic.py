"""Seeded synthetic metric histories with known truth, for the detection tests and benchmark.

Each history is one series of nightly points (level 100, Gaussian noise relative to the level)
plus the index where its change starts, if any. The kinds are the ones the detector must tell
apart: a step, one outlier, a slow drift, a step in the last two points, a crash that appears
(outcomes only), and plain noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["KINDS", "History", "generate"]

KINDS = ("step", "outlier", "drift", "late-step", "crash", "flat")


@dataclass(frozen=True)
class History:
    kind: str
    seed: int
    values: tuple[float, ...]
    outcomes: tuple[str, ...]  # "pass" | "crash" per point; a crashed point has no value (nan)
    change: int | None  # index of the first changed point (the first bad build)


def generate(kind: str, seed: int, *, n: int = 60, noise: float = 0.03, step: float = -0.08,
             outlier: float = 0.25, drift: float = -0.15, level: float = 100.0) -> History:
    """One history of ``kind``; the same ``seed`` always gives the same history."""
    if kind not in KINDS:
        raise ValueError(f"history kind {kind!r} is not one of {', '.join(KINDS)}")
    rng = np.random.default_rng([seed, KINDS.index(kind)])
    base = np.full(n, level)
    change: int | None = None
    outcomes = ["pass"] * n
    if kind == "step":
        change = int(rng.integers(n // 3, n - 11))  # at least 12 points after: a late step is its own kind
        base[change:] *= 1 + step
    elif kind == "late-step":
        change = n - 2
        base[change:] *= 1 + step
    elif kind == "outlier":
        i = int(rng.integers(n // 3, n - 4))
        base[i] *= 1 + outlier * (1 if rng.random() < 0.5 else -1)
    elif kind == "drift":
        change = 0
        base *= 1 + drift * np.arange(n) / (n - 1)
    elif kind == "crash":
        change = int(rng.integers(n // 2, n - 1))
        outcomes[change:] = ["crash"] * (n - change)
    values = base * (1 + noise * rng.standard_normal(n))
    if kind == "crash":
        values[change:] = np.nan
    return History(kind=kind, seed=seed, values=tuple(float(v) for v in values), outcomes=tuple(outcomes),
                   change=change)
