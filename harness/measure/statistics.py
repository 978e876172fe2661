"""Statistics for before/after comparisons of per-trial metrics.

Pure functions over plain sequences of floats: no I/O, no plotting, nothing from the rest of
the harness. The comparison module turns their numbers into verdicts.

Method
------
Samples are per-trial values of one metric (acceptance length, output throughput) for two
builds, ``before`` and ``after``. Trials are independent runs, so the two samples are
independent and usually small (3 to 10 values each).

* Effect size: the relative delta ``stat(after) / stat(before) - 1`` with ``stat`` the mean
  (or the median). A relative delta reads the same for tokens per step and tokens per second.
* Confidence interval: percentile bootstrap of that relative delta. Each side is resampled
  with replacement on its own (the samples are not paired), ``n_resamples`` times, with a
  seeded generator so the same samples always give the same interval. Resamples whose
  ``before`` statistic is 0 have no relative delta and are left out.
* Significance: the two-sided Mann-Whitney U test (``scipy.stats.mannwhitneyu``), which
  assumes nothing about the shape of the distributions. Without ties scipy uses the exact
  distribution for small samples and the normal approximation for large ones. With ties
  (deterministic builds repeat values) and few enough arrangements (``C(n1 + n2, n1)`` up
  to 20000) the p-value comes from the exact permutation distribution of U instead, so
  small tied samples are not judged by an approximation. Two samples made of one and the
  same value have p = 1.
* Power: with ``n1`` and ``n2`` values the smallest two-sided p-value the exact test can
  give is ``2 / C(n1 + n2, n1)`` (every value of one side beats every value of the other).
  ``min_p_value`` returns it so callers can tell "no difference" from "too few trials to
  ever see one" (3 vs 3 trials cannot go below p = 0.1; 5 vs 5 reach 0.0079).

References: Mann & Whitney (1947); Efron & Tibshirani, "An Introduction to the Bootstrap"
(1993), chapter 13 (percentile intervals). asv's ``statistics.py`` follows the same split of
point estimate, interval and rank test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.stats import PermutationMethod, mannwhitneyu

__all__ = ["Stats", "summarize", "bootstrap_ci", "mann_whitney", "min_p_value", "relative_delta"]

StatName = Literal["mean", "median"]

_EXACT_PERMUTATION_LIMIT = 20000


@dataclass(frozen=True)
class Stats:
    """Summary of one sample. ``stdev`` is the sample standard deviation (ddof=1), 0 for n < 2."""

    n: int
    mean: float
    median: float
    stdev: float
    min: float
    max: float


def _as_array(samples: Sequence[float], name: str) -> np.ndarray:
    values = np.asarray(list(samples), dtype=float)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"{name}: need at least one sample")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name}: samples must be finite numbers, got {list(samples)!r}")
    return values


def summarize(samples: Sequence[float]) -> Stats:
    """Count, mean, median, sample standard deviation, min and max of ``samples``."""
    values = _as_array(samples, "samples")
    stdev = float(np.std(values, ddof=1)) if values.size > 1 else 0.0
    return Stats(
        n=int(values.size),
        mean=float(np.mean(values)),
        median=float(np.median(values)),
        stdev=stdev,
        min=float(np.min(values)),
        max=float(np.max(values)),
    )


def _stat(values: np.ndarray, stat: StatName, axis: int | None = None) -> np.ndarray:
    if stat == "mean":
        return np.mean(values, axis=axis)
    if stat == "median":
        return np.median(values, axis=axis)
    raise ValueError(f"stat must be 'mean' or 'median', got {stat!r}")


def relative_delta(before: Sequence[float], after: Sequence[float], *, stat: StatName = "mean") -> float:
    """``stat(after) / stat(before) - 1``; NaN when ``stat(before)`` is 0."""
    b = float(_stat(_as_array(before, "before"), stat))
    a = float(_stat(_as_array(after, "after"), stat))
    if b == 0.0:
        return math.nan
    return a / b - 1.0


def bootstrap_ci(
    before: Sequence[float],
    after: Sequence[float],
    *,
    stat: StatName = "mean",
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the relative delta ``stat(after) / stat(before) - 1``.

    Both samples are resampled independently. Returns ``(nan, nan)`` when no resample has a
    non-zero ``before`` statistic.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples!r}")
    b = _as_array(before, "before")
    a = _as_array(after, "after")
    rng = np.random.default_rng(seed)
    b_stats = _stat(rng.choice(b, size=(n_resamples, b.size), replace=True), stat, axis=1)
    a_stats = _stat(rng.choice(a, size=(n_resamples, a.size), replace=True), stat, axis=1)
    usable = b_stats != 0.0
    if not np.any(usable):
        return (math.nan, math.nan)
    deltas = a_stats[usable] / b_stats[usable] - 1.0
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(deltas, [tail, 100.0 - tail])
    return (float(low), float(high))


def mann_whitney(before: Sequence[float], after: Sequence[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test; 1.0 when all values are equal."""
    b = _as_array(before, "before")
    a = _as_array(after, "after")
    if np.all(np.concatenate([b, a]) == b[0]):
        # scipy's normal approximation divides by a zero variance here.
        return 1.0
    combined = np.concatenate([b, a])
    method: str | PermutationMethod = "auto"
    arrangements = math.comb(combined.size, b.size)
    has_ties = np.unique(combined).size < combined.size
    # scipy's permutation method wants two values per side; one-value sides keep the default.
    if has_ties and min(b.size, a.size) >= 2 and arrangements <= _EXACT_PERMUTATION_LIMIT:
        # n_resamples at least the number of arrangements makes scipy enumerate them all.
        method = PermutationMethod(n_resamples=arrangements)
    p = float(mannwhitneyu(b, a, alternative="two-sided", method=method).pvalue)
    return 1.0 if math.isnan(p) else min(p, 1.0)


def min_p_value(n_before: int, n_after: int) -> float:
    """Smallest two-sided p-value the exact Mann-Whitney test can give for these sample sizes."""
    if n_before < 1 or n_after < 1:
        return 1.0
    return min(1.0, 2.0 / math.comb(n_before + n_after, n_before))
