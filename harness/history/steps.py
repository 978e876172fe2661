"""Changes in one metric series: confirmed steps, slow drift, and suspicious tails.

The series is one value per point (the median of a point's trials), in build order. The method:

1. Noise: sigma from the median absolute deviation of first differences (a step moves one
   difference only, so it barely moves sigma).
2. Outliers: a point far (> 4 sigma) from the median of its three neighbours on each side while
   those neighbours agree with each other is an isolated outlier; it is replaced by that median
   for the change-point search and left out of the test samples.
3. Change points: ``ruptures`` PELT with the squared-error cost (``KernelCPD`` with the linear
   kernel: the same l2 cost, solved in C; 0.02 ms for 60 points against 30 ms for ``Pelt``), ``jump=1``,
   ``min_size=3``, penalty ``PENALTY * sigma^2 * log(n)``. ``min_size=3`` is what makes a step with
   fewer than three points after it impossible to confirm.
4. Confirmation, per change point, all of: the shift is at least ``MIN_Z`` standard errors
   (sigma * sqrt(1/n_before + 1/n_after)): checked on every night, a history of 60 nights makes
   some 20 independent tries, so a per-try false-alarm rate near 1e-4 is what keeps a noisy
   series quiet; a two-sided Mann-Whitney U test (scipy) of up to 20 points before against the
   points after (p < ``ALPHA``), robust to a stray point; the minimum relative effect (2% acceptance
   length, 5% throughput, or the scenario's tolerance); and a step that stays significant on top of a
   straight line (OLS of level + slope + step over the window, ``|t| >= MIN_T_OVER_TREND``): a steady
   slope cut in two is drift, not a step.
5. Suspicious: the last one or two points on the same side of the level before them, their mean
   beyond the minimum effect and ``SUSPICIOUS_Z`` standard errors from it: reported, never an alert,
   until a third point can confirm it.
6. Drift: a Theil-Sen slope over the points since the last confirmed step (at most
   ``DRIFT_WINDOW``, at least 10) whose 95% interval excludes 0 and whose change over the window
   reaches the minimum effect.

Pure functions over numbers; the series, the store and the alerts live elsewhere.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import ruptures as rpt
from scipy import stats

__all__ = ["Finding", "Rule", "detect", "noise"]

PENALTY = 3.0
ALPHA = 0.01
MIN_Z = 4.5
PERSIST_TOLERANCE = 2
SUSPICIOUS_Z = 2.5
MIN_AFTER = 3
MIN_BEFORE = 5
MAX_BEFORE = 20
MIN_T_OVER_TREND = 3.5
DRIFT_WINDOW = 30
DRIFT_MIN_POINTS = 10
SEARCH_WINDOW = 80  # older history has been judged by earlier nights


@dataclass(frozen=True)
class Rule:
    """How a metric is judged: the smallest relative change that matters, and which way is better."""

    min_effect: float
    higher_is_better: bool = True

    def is_regression(self, effect: float) -> bool:
        return effect < 0 if self.higher_is_better else effect > 0


@dataclass(frozen=True)
class Finding:
    """One change: ``index`` is the first point after it (the first bad build of a step)."""

    kind: str  # "step" | "suspicious" | "drift"
    index: int
    before: float
    after: float
    effect: float  # after / before - 1
    p_value: float | None
    regression: bool


def noise(y: np.ndarray) -> float:
    """Robust standard deviation of the noise around the level."""
    if len(y) < 3:
        return 0.0
    d = np.diff(y)
    mad = float(np.median(np.abs(d - np.median(d))))
    return 1.4826 * mad / np.sqrt(2.0)


def _neighbour_medians(y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per point: the median of up to 3 points on its left, on its right, and of both sides together."""
    pad = np.concatenate([np.full(3, np.nan), y, np.full(3, np.nan)])
    w = np.lib.stride_tricks.sliding_window_view(pad, 7)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN edges: no neighbours on that side
        left = np.nanmedian(w[:, :3], axis=1)
        right = np.nanmedian(w[:, 4:], axis=1)
        both = np.nanmedian(np.concatenate([w[:, :3], w[:, 4:]], axis=1), axis=1)
    return left, right, both


def _outliers(y: np.ndarray, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """(mask of isolated outliers, the value each is replaced by); the ends are never outliers."""
    mask = np.zeros(len(y), dtype=bool)
    left, right, local = _neighbour_medians(y)
    if sigma > 0 and len(y) >= 3:
        agree = (np.abs(left - local) <= 2.5 * sigma) & (np.abs(right - local) <= 2.5 * sigma)
        mask = agree & (np.abs(y - local) > 4 * sigma)
        mask[0] = mask[-1] = False
    return mask, local


def _relative(after: float, before: float) -> float:
    return after / before - 1.0 if before else (0.0 if after == before else float("inf"))


def _step_over_trend(x: np.ndarray, y: np.ndarray, cut: int, sigma: float) -> float:
    """The t statistic of a step at ``cut`` fitted on top of a straight line (OLS of y = a + b x + c step).

    A steady slope that a change-point search cut in two leaves the step term near zero; a real step
    stays large even when the line is free to tilt.
    """
    step = (np.arange(len(x)) >= cut).astype(float)
    design = np.column_stack([np.ones(len(x)), x - x.mean(), step])
    coef, _, rank, _ = np.linalg.lstsq(design, y, rcond=None)
    if rank < 3:
        return 0.0
    resid = y - design @ coef
    dof = max(1, len(y) - 3)
    s = max(sigma, float(np.sqrt(np.sum(resid ** 2) / dof)))
    cov = np.linalg.inv(design.T @ design) * s ** 2
    return float(abs(coef[2]) / np.sqrt(cov[2, 2]))


def _change_points(z: np.ndarray, sigma: float) -> list[int]:
    if len(z) < 2 * MIN_AFTER or sigma <= 0:
        return []
    algo = rpt.KernelCPD(kernel="linear", min_size=MIN_AFTER, jump=1).fit(z)
    ends = algo.predict(pen=PENALTY * sigma ** 2 * np.log(len(z)))
    return [int(e) for e in ends[:-1]]


def detect(values: Sequence[float], rule: Rule, trials: Sequence[Sequence[float]] | None = None) -> list[Finding]:
    """Every confirmed step, the suspicious tail and the drift of a series, oldest first.

    ``trials`` (optional, one sequence per point) are the raw per-trial values: the Mann-Whitney
    test then compares trials, not point medians. A step counts when the night before (the series
    without its newest point) already showed it, as a step or as a suspicious tail: a single new
    point can tip a borderline test, two nights in a row rarely do by chance.
    """
    now = _detect(values, rule, trials)
    if len(values) < 2:
        return now
    earlier = [f.index for f in _detect(values[:-1], rule, trials[:-1] if trials is not None else None)
               if f.kind in ("step", "suspicious")]
    return [f for f in now if f.kind != "step" or any(abs(f.index - e) <= PERSIST_TOLERANCE for e in earlier)]


def _detect(values: Sequence[float], rule: Rule, trials: Sequence[Sequence[float]] | None) -> list[Finding]:
    full = np.asarray(values, dtype=float)
    offset = max(0, len(full) - SEARCH_WINDOW)
    y = full[offset:]
    raw = [np.asarray(t, dtype=float) for t in trials[offset:]] if trials is not None else [np.array([v]) for v in y]
    n = len(y)
    if n < 4:
        return []
    sigma = noise(y)
    floor = 1e-6 * max(1e-12, float(np.median(np.abs(y))))
    sigma = max(sigma, floor)
    outlier, local = _outliers(y, sigma)
    z = np.where(outlier, local, y)

    findings: list[Finding] = []
    cps = _change_points(z, sigma)
    bounds = [0, *cps, n]
    # The difference-based sigma of a short series is itself noisy, and the nights it comes out low
    # are the nights a false step would pass: take the larger of it and the spread around the segments.
    resid = np.concatenate([z[a:b] - np.median(z[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=False)])
    sigma = max(sigma, 1.4826 * float(np.median(np.abs(resid))) * np.sqrt(n / max(1, n - len(cps) - 1)))
    confirmed: list[int] = []
    for j, c in enumerate(cps):
        # Before reaches back to the last *confirmed* step: an unconfirmed change point is noise, and
        # cutting the baseline there would shrink it to the few points that made the noise look like a step.
        ctx = confirmed[-1] if confirmed else 0
        lo, hi = max(ctx, c - MAX_BEFORE), min(bounds[j + 2], c + MAX_BEFORE)
        keep = ~outlier
        before = y[lo:c][keep[lo:c]]
        after = y[c:hi][keep[c:hi]]
        if hi == n and len(after) > MIN_AFTER and abs(after[-1] - np.median(after[:-1])) > 4 * sigma:
            after = after[:-1]  # the newest point may be an outlier no later point can show yet
        if len(before) < MIN_BEFORE or len(after) < MIN_AFTER:
            continue
        effect = _relative(float(np.median(after)), float(np.median(before)))
        if abs(effect) < rule.min_effect:
            continue
        shift = abs(float(np.mean(after) - np.mean(before)))
        spread = max(sigma, float(np.std(before, ddof=1)), float(np.std(after, ddof=1)))
        if shift < MIN_Z * spread * np.sqrt(1 / len(before) + 1 / len(after)):
            continue
        before_raw = np.concatenate([raw[i] for i in range(lo, c) if keep[i]])
        after_raw = np.concatenate([raw[i] for i in range(c, hi) if keep[i]])
        p = float(stats.mannwhitneyu(before_raw, after_raw, alternative="two-sided").pvalue)
        if p >= ALPHA:
            continue
        # The trend test sees everything since the last confirmed step: a slope is pinned down by a
        # long context, and a steady drift cannot pass for a step however the search cut it.
        x = np.arange(ctx, n, dtype=float)
        if _step_over_trend(x[keep[ctx:]], z[ctx:][keep[ctx:]], int(np.sum(keep[ctx:c])), sigma) < MIN_T_OVER_TREND:
            continue
        confirmed.append(c)
        findings.append(Finding("step", offset + c, float(np.median(before)), float(np.median(after)), effect, p,
                                rule.is_regression(effect)))

    last = confirmed[-1] if confirmed else 0
    tail = _suspicious_tail(y, z, last, sigma, rule)
    if tail is not None:
        k, before_level, after_level, effect = tail
        findings.append(Finding("suspicious", offset + n - k, before_level, after_level, effect, None,
                                rule.is_regression(effect)))
    drift = _drift(z[last:] if tail is None else z[last:n - tail[0]], rule)
    if drift is not None:
        start, before_level, after_level, effect = drift
        findings.append(Finding("drift", offset + last + start, before_level, after_level, effect, None,
                                rule.is_regression(effect)))
    return findings


def _suspicious_tail(y: np.ndarray, z: np.ndarray, last: int, sigma: float,
                     rule: Rule) -> tuple[int, float, float, float] | None:
    n = len(y)
    for k in (2, 1):
        ref = z[max(last, n - k - MAX_BEFORE):n - k]
        if len(ref) < MIN_AFTER:
            continue
        level = float(np.median(ref))
        effects = [_relative(float(v), level) for v in y[n - k:]]
        same_way = all(e < 0 for e in effects) or all(e > 0 for e in effects)
        after = float(np.mean(y[n - k:]))
        z_tail = abs(after - level) / (sigma * np.sqrt(1 / k + 1 / len(ref)))
        if same_way and abs(_relative(after, level)) >= rule.min_effect and z_tail >= SUSPICIOUS_Z:
            return k, level, after, _relative(after, level)
    return None


def _drift(z: np.ndarray, rule: Rule) -> tuple[int, float, float, float] | None:
    if len(z) < DRIFT_MIN_POINTS:
        return None
    start = max(0, len(z) - DRIFT_WINDOW)
    w = z[start:]
    x = np.arange(len(w), dtype=float)
    slope, intercept, lo, hi = stats.theilslopes(w, x, alpha=0.95)
    if lo <= 0 <= hi:
        return None
    first, last = intercept, intercept + slope * (len(w) - 1)
    effect = _relative(float(last), float(first))
    if abs(effect) < rule.min_effect:
        return None
    return start, float(first), float(last), effect
