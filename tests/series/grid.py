"""A grid of seeded metric histories with known truth, harder and broader than ``synthetic``.

Each history is one series of nights; each night holds the raw trials the nightly would have
(1-5 per point; none on a gap night: a crashed or infra night leaves no number). The noise of a
trial is relative to the level and has a share shared by the night's trials (a busy machine slows
every trial of that night), so trials of one night are not independent. Kinds:

- ``step``: a step of ``effect`` (down or up, 3-15%) at any night, the last 1-3 included;
- ``drift``: a straight slide of ``effect`` (-5% to -20%) over the whole history from a start
  night; ``drift-stops``: the same slide that stops and stays at its new level;
- quiet kinds, which no alert may name: ``flat``, ``outlier`` (one night 15-40% off),
  ``burst`` (2-3 nights in a row off the same way), ``bimodal`` (each trial in one of two modes),
  ``student-t`` (Student t, 3 degrees of freedom), ``noise-change`` (the noise doubles or halves
  from a night on, the mean stays), ``gaps`` (a tenth of the nights missing).

The noise family of a step or drift series is Gaussian, Student t(3) or bimodal, and every
series may have gap nights. ``noise`` is the standard deviation of one trial in every family.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

__all__ = ["EFFECTS", "LARGE_EFFECTS", "NOISES", "QUIET_KINDS", "YOUNG_BEFORE", "GridHistory", "grid", "young_grid"]

EFFECTS = (0.03, 0.05, 0.08, 0.10, 0.15)
NOISES = (0.01, 0.02, 0.04, 0.06, 0.08)
DRIFTS = (-0.05, -0.10, -0.15, -0.20)
QUIET_KINDS = ("flat", "outlier", "burst", "bimodal", "student-t", "noise-change", "gaps")
ALL_KINDS = ("step", "drift", "drift-stops", *QUIET_KINDS, "young-step", "young-flat")
LARGE_EFFECTS = (0.30, 0.50, 0.80)  # a large change: a build that lost a third, half or four fifths of it
YOUNG_BEFORE = (3, 5, 10)  # nights of history before it
YOUNG_AFTER = 10  # nights after it
NIGHTS = 60
LEVEL = 100.0


@dataclass(frozen=True)
class GridHistory:
    kind: str
    seed: int
    noise: float
    family: str  # gaussian | student-t | bimodal
    trials: tuple[tuple[float, ...], ...]  # per night; () on a gap night
    effect: float | None = None  # relative size of the step or of the whole drift
    change: int | None = None  # the first changed night (the first bad build)
    change_end: int | None = None  # a drift: the last night it still moves (the last night if it never stops)

    @property
    def nights(self) -> int:
        return len(self.trials)


def _unit_noise(rng: np.random.Generator, family: str, size: int) -> np.ndarray:
    """Noise of standard deviation 1 in ``family``."""
    if family == "student-t":
        return rng.standard_t(3, size) / np.sqrt(3.0)
    if family == "bimodal":
        # Two modes at +-0.95 with a little spread: sd = sqrt(0.95^2 + 0.3^2) ~ 1.
        return np.where(rng.random(size) < 0.5, -0.95, 0.95) + 0.3 * rng.standard_normal(size)
    return rng.standard_normal(size)


def _trials(rng: np.random.Generator, level: np.ndarray, sd: np.ndarray, family: str,
            counts: np.ndarray) -> tuple[tuple[float, ...], ...]:
    """Per night ``counts[i]`` trials around ``level[i]``: a night share ``rho`` of the variance, the rest per trial."""
    rho = float(rng.uniform(0.0, 0.5))
    out: list[tuple[float, ...]] = []
    for i, k in enumerate(counts):
        if k == 0:
            out.append(())
            continue
        shared = np.sqrt(rho) * _unit_noise(rng, family, 1)[0]
        own = np.sqrt(1 - rho) * _unit_noise(rng, family, int(k))
        out.append(tuple(float(v) for v in level[i] * (1 + sd[i] * (shared + own))))
    return tuple(out)


def _counts(rng: np.random.Generator, n: int, gap_share: float) -> np.ndarray:
    """Trials per night: the series' own count (1-5), a trial lost now and then, and gap nights."""
    k = int(rng.integers(1, 6))
    counts = np.full(n, k)
    lost = rng.random(n) < 0.1
    counts[lost] = np.maximum(1, k - 1)
    gaps = rng.random(n) < gap_share
    gaps[:3] = False  # a history starts with numbers
    counts[gaps] = 0
    return counts


def _one(kind: str, seed: int, noise: float, effect: float | None, family: str) -> GridHistory:
    rng = np.random.default_rng([seed, ALL_KINDS.index(kind), int(noise * 1000), int((effect or 0) * 1000) + 500])
    n = NIGHTS
    level = np.full(n, LEVEL)
    sd = np.full(n, noise)
    change = end = None
    counts = _counts(rng, n, 0.10 if kind == "gaps" else 0.03)
    if kind == "step" and effect is not None:
        change = int(rng.integers(15, n))  # anywhere from night 15 to the last night
        level[change:] *= 1 + effect
    elif kind in ("drift", "drift-stops") and effect is not None:
        change = int(rng.integers(0, n // 4))
        end = n - 1 if kind == "drift" else int(rng.integers(change + 20, n - 10))
        span = n - 1 - change  # the full slide over the history; one that stops keeps the same rate
        ramp = np.clip((np.arange(n) - change) / span, 0, None)
        ramp[end + 1:] = ramp[end]
        level *= 1 + effect * ramp
    elif kind in ("outlier", "burst"):
        i = int(rng.integers(10, n - 3))
        width = 1 if kind == "outlier" else int(rng.integers(2, 4))
        level[i:i + width] *= 1 + float(rng.uniform(0.15, 0.40)) * (1 if rng.random() < 0.5 else -1)
    elif kind == "noise-change":
        i = int(rng.integers(15, n - 5))
        sd[i:] *= 2.0 if rng.random() < 0.5 else 0.5
    fam = {"bimodal": "bimodal", "student-t": "student-t"}.get(kind, family)
    return GridHistory(kind, seed, noise, fam, _trials(rng, level, sd, fam, counts), effect, change, end)


def _family(rng: np.random.Generator) -> str:
    return str(rng.choice(["gaussian", "gaussian", "gaussian", "student-t", "bimodal"]))


def grid(seed: int, *, per_cell: int = 4, quiet_per_noise: int = 4, drift_per_cell: int = 1) -> Iterator[GridHistory]:
    """Every history of one seed set: steps per (effect, noise, direction), drifts, and the quiet kinds.

    Two seed sets (``seed`` 0 and 1, say) share no history: tune on one, report on the other.
    """
    rng = np.random.default_rng([seed, 7])
    s = seed * 1_000_000
    for noise in NOISES:
        for effect in EFFECTS:
            for sign in (-1, 1):
                for _ in range(per_cell):
                    s += 1
                    yield _one("step", s, noise, sign * effect, _family(rng))
        for drift in DRIFTS:
            for kind in ("drift", "drift-stops"):
                for _ in range(drift_per_cell):
                    s += 1
                    yield _one(kind, s, noise, drift, _family(rng))
        for kind in QUIET_KINDS:
            for _ in range(quiet_per_noise):
                s += 1
                yield _one(kind, s, noise, None, "gaussian")


def _young(kind: str, seed: int, before: int, noise: float, effect: float | None, family: str) -> GridHistory:
    rng = np.random.default_rng([seed, ALL_KINDS.index(kind), before, int(noise * 1000), int((effect or 0) * 1000) + 900])
    n = before + YOUNG_AFTER
    level = np.full(n, LEVEL)
    if effect is not None:
        level[before:] *= 1 + effect
    counts = _counts(rng, n, 0.0)  # no gap night: a young series' nights are what is judged
    return GridHistory(kind, seed, noise, family, _trials(rng, level, np.full(n, noise), family, counts), effect,
                       before if effect is not None else None)


def young_grid(seed: int, *, per_cell: int = 2) -> Iterator[GridHistory]:
    """Young series: ``before`` nights (3, 5, 10) of history, then a large change (``young-step``: -30%, -50%,
    -80%, and as much up) held for 10 nights, or none (``young-flat``), per noise level and noise family."""
    rng = np.random.default_rng([seed, 11])
    s = seed * 1_000_000 + 500_000
    for before in YOUNG_BEFORE:
        for noise in NOISES:
            for effect in LARGE_EFFECTS:
                for sign in (-1, 1):
                    for _ in range(per_cell):
                        s += 1
                        yield _young("young-step", s, before, noise, sign * effect, _family(rng))
            for _ in range(2 * per_cell):
                s += 1
                yield _young("young-flat", s, before, noise, None, _family(rng))
