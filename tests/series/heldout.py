"""Held-out histories in the shape of issue 47's report: sets of 60 series that no rule here was tuned on.

Each set has 12 step histories, 12 more of a harder kind, 24 stationary ones and 12 drifts, 60 nights each:

- ``points`` (a point a night, one or two trials): steps of 2.5-4x the noise (``step``), noisy steps of
  1.7-2x (``noisy-step``), stationary series whose noise is high (3-8%) and of many shapes, drifts;
- ``trials`` (the raw trials, 3-5 a night): steps of three trial standard deviations (``trial-step``: each
  trial's spread hides them, the nights' medians show them), steps right after a gap of 2-3 nights
  (``gap-step``), stationary series and drifts.

The noise comes in shapes the grid (``tests.series.grid``) does not have: autocorrelated (AR(1), 0.6),
skewed (lognormal), a weekly cycle, a spread that changes every 8-12 nights, as well as Gaussian, t(3) and
bimodal. Seed sets are disjoint: choose on one (``TUNE``), report on the others (``REPORT``).

Issue 47's second round chose on ``FRESH_TUNE`` and reports on ``FRESH_REPORT`` (never run while choosing),
and on ``broad=True`` sets: data past what the detector assumes, in the same layout: heavier tails (t(2)),
noise that wanders longer (AR(1) at 0.85), 5% of the nights missing in every history, and noise 1.5 times as
high (the steps stay the same multiples of it).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from tests.series.grid import GridHistory

__all__ = ["FAMILIES", "FRESH_REPORT", "FRESH_TUNE", "REPORT", "TUNE", "heldout"]

NIGHTS = 60
LEVEL = 100.0
FAMILIES = ("gaussian", "student-t", "bimodal", "ar1", "lognormal", "weekly", "regimes")
TUNE = (101, 102, 103)
REPORT = (201, 202, 203)
FRESH_TUNE = (301, 302, 303, 304, 305, 306)
FRESH_REPORT = (401, 402, 403, 404, 405, 406)
BROAD_FAMILIES = ("student-t2", "ar1-long")  # added to FAMILIES in a broad set
BROAD_SD = 1.5  # a broad set's noise, relative to the default sets'
BROAD_GAPS = 0.05  # share of nights without a number in a broad set


def _noise(rng: np.random.Generator, family: str, n: int) -> np.ndarray:
    """Unit-sd noise of one shape, a value a night."""
    if family == "student-t":
        return rng.standard_t(3, n) / np.sqrt(3.0)
    if family == "student-t2":  # no finite variance: scaled as t(3) is, by its spread's usual size
        return rng.standard_t(2, n) / np.sqrt(3.0)
    if family == "ar1-long":
        e = rng.standard_normal(n) * np.sqrt(1 - 0.85 ** 2)
        out = np.empty(n)
        out[0] = rng.standard_normal()
        for i in range(1, n):
            out[i] = 0.85 * out[i - 1] + e[i]
        return out
    if family == "bimodal":
        return np.where(rng.random(n) < 0.5, -0.95, 0.95) + 0.3 * rng.standard_normal(n)
    if family == "ar1":
        e = rng.standard_normal(n) * np.sqrt(1 - 0.36)
        out = np.empty(n)
        out[0] = rng.standard_normal()
        for i in range(1, n):
            out[i] = 0.6 * out[i - 1] + e[i]
        return out
    if family == "lognormal":
        x = np.exp(0.8 * rng.standard_normal(n))
        return (x - np.exp(0.32)) / np.sqrt((np.exp(0.64) - 1) * np.exp(0.64))
    if family == "weekly":
        return (0.8 * np.sin(2 * np.pi * (np.arange(n) + rng.integers(7)) / 7) + 0.6 * rng.standard_normal(n))
    if family == "regimes":
        scale = np.ones(n)
        i = 0
        while i < n:
            width = int(rng.integers(8, 13))
            scale[i:i + width] = rng.choice([0.5, 1.5])
            i += width
        return scale * rng.standard_normal(n) / np.sqrt(1.25)
    return rng.standard_normal(n)


def _make(kind: str, seed: int, rng: np.random.Generator, *, trials: bool, sd: float, family: str,
             effect: float | None = None, change: int | None = None, end: int | None = None,
             gap: range = range(0), broad: bool = False) -> GridHistory:
    n = NIGHTS
    level = np.full(n, LEVEL)
    if kind in ("step", "noisy-step", "trial-step", "gap-step") and effect is not None and change is not None:
        level[change:] *= 1 + effect
    elif kind == "drift" and effect is not None and change is not None and end is not None:
        level *= 1 + effect * np.clip((np.arange(n) - change) / (end - change), 0, 1)
    counts = rng.integers(3, 6, n) if trials else rng.choice([1, 1, 1, 2], n)
    shared = _noise(rng, family, n)
    rho = float(rng.uniform(0.0, 0.3)) if trials else 1.0
    missing = set(np.flatnonzero(rng.random(n) < BROAD_GAPS).tolist()) if broad else set()
    missing.discard(0)
    out: list[tuple[float, ...]] = []
    for i in range(n):
        if i in gap or i in missing:
            out.append(())
            continue
        own = rng.standard_normal(int(counts[i]))
        values = level[i] * (1 + sd * (np.sqrt(rho) * shared[i] + np.sqrt(1 - rho) * own))
        out.append(tuple(float(v) for v in values))
    return GridHistory(kind, seed, sd, family, tuple(out), effect, change, end if kind == "drift" else None)


def heldout(seed: int, kind: str, broad: bool = False) -> Iterator[GridHistory]:
    """One set of 60 histories: ``kind`` is ``points`` or ``trials``; ``broad``: past the detector's assumptions."""
    rng = np.random.default_rng([seed, 47, 0 if kind == "points" else 1, *([2] if broad else [])])
    trials = kind == "trials"
    s = seed * 1000
    families = (*FAMILIES, *BROAD_FAMILIES) if broad else FAMILIES
    fam = [str(f) for f in rng.permutation(np.resize(np.asarray(families), 60))]
    scale = BROAD_SD if broad else 1.0

    def _history(*args: object, **kw: object) -> GridHistory:
        sd = float(kw.pop("sd")) * scale  # type: ignore[arg-type]
        effect = kw.pop("effect", None)
        if effect is not None and kw.get("family") is not None and str(args[0]) != "drift":
            effect = float(effect) * scale  # type: ignore[arg-type]  # a step stays the same multiple of the noise
        return _make(*args, sd=sd, effect=effect, broad=broad, **kw)  # type: ignore[arg-type]

    def sign() -> int:
        return 1 if rng.random() < 0.5 else -1

    for i in range(12):  # steps a night can see
        s += 1
        sd = float(rng.uniform(0.01, 0.03))
        if trials:  # three trial sd: a trial's spread hides it, the night's median does not
            yield _history("trial-step", s, rng, trials=True, sd=sd, family=fam[i], effect=sign() * 3 * sd,
                           change=int(rng.integers(15, 50)))
        else:
            yield _history("step", s, rng, trials=False, sd=sd, family=fam[i],
                           effect=sign() * float(rng.uniform(2.5, 4.0)) * sd, change=int(rng.integers(15, 50)))
    for i in range(12):  # the harder steps
        s += 1
        sd = float(rng.uniform(0.01, 0.03))
        c = int(rng.integers(15, 45))
        if trials:
            g = int(rng.integers(2, 4))  # the nights just before the step have no number: it is seen after a gap
            yield _history("gap-step", s, rng, trials=True, sd=sd, family=fam[12 + i],
                           effect=sign() * float(rng.uniform(3.0, 4.0)) * sd, change=c, gap=range(c - g, c))
        else:
            yield _history("noisy-step", s, rng, trials=False, sd=sd, family=fam[12 + i],
                           effect=sign() * float(rng.uniform(1.7, 2.0)) * sd, change=c)
    for i in range(24):  # stationary: high noise of every shape
        s += 1
        yield _history("stationary", s, rng, trials=trials, sd=float(rng.uniform(0.03, 0.08)), family=fam[24 + i])
    for i in range(12):  # drifts: -10% to -25% over 25 to 50 nights
        s += 1
        c = int(rng.integers(0, 15))
        yield _history("drift", s, rng, trials=trials, sd=float(rng.uniform(0.01, 0.03)), family=fam[48 + i],
                       effect=-float(rng.uniform(0.10, 0.25)), change=c, end=min(NIGHTS - 1, c + int(rng.integers(25, 51))))
