"""Changes in one metric series, judged as the nightly sees it: one night at a time, the past only.

A series is one point per night (the median of the night's trials, with the trials kept). The
detector is sequential: ``Tracker`` takes the nights in order and keeps what it has decided (the
confirmed steps, a drift already named); ``detect`` replays a whole history through it, so the
nightly, which reads the history from the store, says exactly what the tracker said on each
night. Per night:

1. **Noise, from the trials.** A point's variance is ``sb^2 + sw^2 / k`` for its ``k`` trials:
   ``sw`` from the spread of trials within nights (pooled, robust), ``sb`` the rest of the spread
   between nights (first differences of the points, a trimmed mean of their size). A point with more trials counts for
   more, and trials of one night are never treated as independent samples of the level.
2. **Step.** Among the recent splits of the segment since the last confirmed change (at least
   ``MIN_LOOK`` points after, at most ``MAX_AFTER``), the one that fits a two-level model best (least
   squares, weighted: the likeliest place of one change); its z from weighted means of the two
   sides, each point clipped to 3 sd of its side's median, against the noise model scaled by the
   spread of the split's own residuals pooled over both sides (``SPREAD_FLOOR`` at least; the after
   side's own spread counts when it is larger, so a noise level that rises is not a step), widened
   for night-to-night correlation by the exact variance of the two means' difference under AR(1)
   noise (``_ar_split_widen``). It is confirmed when all hold: at
   least ``MIN_AFTER`` points after it (a burst of three bad nights that ends is not a step: the
   fourth night shows it); ``z >= Z_STEP``; the minimum effect (2% acceptance length, 5% throughput
   and latency, or the scenario's tolerance); the newest point and at least 70% of the points since
   on the new side; ``z >= Z_WITHOUT_NEWEST`` without the newest two points (a change in the last
   two points is at most suspicious, and cannot carry an earlier split alone); a step on top of a
   straight line over the segment at ``t >= T_TREND`` with the same sign and no slope the same way
   before it (``t < SLIDE_T``): a slide cut in two is drift; no ramp of ``RAMP_MIN`` or more nights
   that fits better by ``RAMP_OVER_STEP`` and no slope the same way after it (``t < SLIDE_AFTER_T``):
   a level that slides into its new place is drift; and the night before had its best split
   within 2 points at ``z >= Z_PREV``, same sign. That is how the many looks at one series are
   controlled: one fixed threshold on a statistic that must hold on two nights in a row, set on the
   tuning seed set of ``benchmarks/bench_nightly_alerts.py`` for a false-alarm rate per
   series-night, not per test.
3. **Drift**, as strict: a weighted straight line over the segment (at least ``DRIFT_MIN_POINTS``),
   slope ``t >= Z_DRIFT`` on two nights in a row, a change over the segment of at least the
   minimum effect, and a line that fits better than the best single step (by ``DRIFT_OVER_STEP``
   in units of the noise variance). Named once per segment
   (its first point is the segment's): a drift that continues is the same drift; and not at all
   when the segment began with a step the same way (a slide the step rule caught early, going on:
   its first bad build is the step's, already raised). Once the slide has stopped (a ramp that ends
   ``MIN_BEFORE`` or more points back fits better than a slide still going, by ``Z_DRIFT ** 2``) its
   episode is closed: the segment starts where the level settled, so a step after a drift is judged
   against the new level, not against the old slide; the drift is not raised again in that segment.
4. **Suspicious**: the newest one to three points beyond ``SUSPICIOUS_Z`` from the level before
   them and past the minimum effect: shown, never an alert.
5. **Level change, renamed in place.** A step that passes every test above but that the start of
   a slide still going (a hinge) or a short ramp fits about as well (within ``LEVEL_MARGIN`` noise
   units of the step's RSS) is confirmed as a ``level-change``: the nights seen cannot tell a step
   from the start of a drift (a 20% drift under 1% noise, 10 nights in, fits a step at 17.3 and a
   hinge at 16.1). On later nights, up to ``LEVEL_WINDOW`` nights after it, the same finding is
   renamed in place (same index, so the same first bad build and the same alert): ``drift`` when the
   hinge or ramp fits better than the step by ``LEVEL_DECIDE`` or the drift rule fires in its
   segment the same way; ``step`` when the step fits better than both by ``LEVEL_DECIDE``; by RSS
   only with at least ``LEVEL_AFTER`` nights after it (the RSS weighed by the noise model of the
   night it was raised); ``drift`` too when a second change the same way is confirmed in its window
   (the level moved on: a slide under noise looks like a staircase), which is then no second alert.
   Each name is kept with the night and the evidence (``Finding.names``). A level change not decided
   in the window keeps its name. A step is renamed ``drift`` in place too, in the same window, when the
   drift rule fires the same way in the segment it began: the level slid on after it, a drift whose first
   nights the step rule took for a step (issue 47's held-out drifts that begin 11-15 nights in). A change
   with fewer than ``LEVEL_SHORT`` points before it in its segment is a level change too: the slide
   tests have no power over so few nights (a drift that began on the sixth night of a series was
   confirmed as a step by its tenth).
6. **Large change**, however young the series: the step rule needs ``MIN_BEFORE`` points before a
   change and ``MIN_AFTER`` after it, so a series of five nights could not raise an 80% throughput drop
   until its tenth. A change is raised on its ``LARGE_NIGHTS``-th night (the second) when both its
   nights sit on the same side of the level just before them (the median of the segment's newest
   ``LARGE_LEVEL`` points, at least ``LARGE_MIN_BEFORE``: a slide's newest points lag it by a few nights
   only, so a slide is not a large change), each farther from it than the *large band*: the larger
   of ``LARGE_FACTOR`` times the minimum effect (25% throughput and latency, 10% acceptance length: the
   metric's known noise) and ``LARGE_Z`` times the spread the series itself shows (with fewer than
   ``MIN_BEFORE`` points their plain standard deviation, else the first differences' trimmed spread over
   the segment, up to ``MAX_BEFORE`` points; one trial's within-night spread when larger), widened for a
   spread read from few points (Student's t over the normal at 99.5%: 3.9x from three points, 1.8x from five)
   and for the level's own error. On a segment of ``MATURE_NIGHTS``
   or more points, where the step rule confirms a change of the minimum effect on its fourth night and an
   excursion of up to three nights is a transient that reaches no one, the floor is at least
   ``LARGE_MATURE`` (half the level): only a change that large is worth raising two nights early. It
   starts a new segment, as a step does. One night alone is never enough (a night off is an outlier until
   the next says otherwise); a burst of two or three nights beyond the band is raised too, which is what
   it costs (docs/alerts.md).
   The band is also what a young series can judge (``large_band``): until it has ``MIN_BEFORE +
   MIN_AFTER`` nights, changes smaller than it cannot be told from noise yet.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np

__all__ = ["LARGE_CHANGE", "MATURE_NIGHTS", "RENAMED", "Finding", "Rule", "Tracker", "detect", "large_band", "large_floor",
           "large_level", "mad_noise", "noise"]

RENAMED = "renamed:"  # what ``Tracker.push`` puts before the new name of a level change renamed tonight

MIN_AFTER = 4
MIN_LOOK = 3  # the night before a confirmation may look at a split with one point fewer
MAX_AFTER = 16
MIN_BEFORE = 6
MAX_BEFORE = 30
NOISE_WINDOW = 40
Z_STEP = 4.5
Z_PREV = 3.5
T_TREND = 3.0
Z_DRIFT = 5.0
DRIFT_MIN_POINTS = 15
DRIFT_WINDOW = 80
SUSPICIOUS_Z = 3.0
NEW_SIDE_SHARE = 0.7
CLIP = 3.0
SLIDE_T = 3.0
Z_WITHOUT_NEWEST = 3.0
DRIFT_OVER_STEP = 4.0
RAMP_MIN = 4  # nights a ramp takes at least: one that takes fewer is a step
RAMP_OVER_STEP = 4.0
SLIDE_AFTER_T = 2.5
LEVEL_MARGIN = 3.0  # a hinge or ramp within this many noise units of the step's RSS: cannot tell yet
LEVEL_DECIDE = 4.0  # one model better than the other by this many noise units: renamed
LEVEL_WINDOW = 30  # nights after the change in which a level change may still be renamed
LEVEL_AFTER = 8  # nights after the change before a level change may be renamed
LEVEL_SHORT = 15  # a change with fewer points than this before it in its segment is raised as a level change
LARGE_CHANGE = "large-change"
LARGE_NIGHTS = 2  # nights on the new side before a large change is raised
LARGE_MIN_BEFORE = 3  # points of the level before it, at least
LARGE_FACTOR = 5.0  # the band's floor, in minimum effects
LARGE_Z = 3.0  # the band, in the spread the series shows
LARGE_LEVEL = 5  # the level before a large change: the median of this many points before it, at most
LARGE_MATURE = 0.5  # the band's floor (relative) on a segment the step rule can judge
AR_MIN = 10  # points a lag-1 autocorrelation of residuals is read from, at least
# A sample lag-1 autocorrelation over a few dozen points is already biased toward 0 (by about (1 + 4 rho) / n):
# nothing is taken off it. Taking 0.5 / sqrt(n) off as well (issue 47's first try) widened AR(1) noise at 0.6 as
# if it were 0.3 on a young segment, where most of the noisy stationary series' false alarms were raised.
AR_BIAS = 0.0
SUSPICIOUS_AR_BIAS = 0.5  # the suspicious tail (shown, never an alert) keeps that reading: shown as early as before
# The step's z is against a noise read from the segment's own points (the spread of first differences, which a
# step in the window widens too), so on a short segment it is a t of few degrees of freedom: Z_STEP and
# Z_PREV are raised by 1 + Z_DF / (points of the noise model - 1), x1.29 over 15 points, x1.10 over 40.
Z_DF = 4.0
AR_CAP = 0.8
# A point's noise is at least this share of the minimum effect: a series that repeats itself to the digit (the
# reference server's acceptance length) has no noise to weigh by, and a floor of a millionth of the level made its
# RSS figures and z billions ("slide going 1050496523.7"). At this floor a change of the minimum effect is still
# 10 noise units, far past every threshold.
NOISE_FLOOR = 0.1
# The noise from first differences: a trimmed mean of their absolute deviations, not their median (MAD). A median
# of |differences| falls in the gap between two modes: a bimodal noise that switched modes on most nights read
# 3.4-4.1 for a true sd of 2.3 (issue 47, fresh tune set 302), and the steps on it were never confirmed. On normal
# noise the trimmed mean's relative variance is 1.7x smaller than the MAD's (15 and 40 points); the largest tenth left
# out keeps a stray night or a step's own difference from widening it.
NOISE_TRIM = 0.1
# E|X| of a normal X over its central 1 - NOISE_TRIM, in sd (0.657 at a tenth out): what the trimmed mean reads
# on a normal noise of sd 1.
_Q = NormalDist().inv_cdf(1 - NOISE_TRIM / 2)
TRIMMED_MEAN_ABS = math.sqrt(2 / math.pi) * (1 - math.exp(-_Q * _Q / 2)) / (1 - NOISE_TRIM)
# A split's z is against the noise model scaled by the spread of the split's own residuals, pooled over both sides
# (a quasi-likelihood, as the line fits): the model is read from first differences, which a noise that alternates
# reads too wide and a noise that wanders reads too narrow. Never below this share of the model: a few residuals
# may sit close by chance. Until issue 47's third round each side took its own spread, never below the model: the
# after side's three or four points by chance spread narrow, and a noise the model under-read was not widened there.
SPREAD_FLOOR = 0.7
MATURE_NIGHTS = MIN_BEFORE + MIN_AFTER  # from here on the step rule judges changes of the minimum effect


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

    kind: str  # "step" | "suspicious" | "drift" | "level-change"
    index: int
    before: float
    after: float
    effect: float  # after / before - 1
    p_value: float | None  # kept for the store's rows; the sequential rule has no per-test p
    regression: bool
    z: float = 0.0
    # Every name it had, oldest first: (index of the night it was named on, name, evidence). Empty for a
    # finding never renamed nor born a level change (its name is ``kind``, named when confirmed).
    names: tuple[tuple[int, str, str], ...] = ()

    def __post_init__(self) -> None:
        # Restored from JSON (the detections cache) the names come back as lists: kept as tuples.
        object.__setattr__(self, "names", tuple((int(i), str(k), str(e)) for i, k, e in self.names))

    @property
    def first_name(self) -> str:
        """The name it was raised under: what its alert's fingerprint keeps through renames."""
        return self.names[0][1] if self.names else self.kind


def noise(y: np.ndarray) -> float:
    """Standard deviation of the point noise around the level, from first differences (a step or a slide
    widens them by one night or a little): the mean of their absolute deviations from their median, the
    largest NOISE_TRIM of them left out, scaled to a normal's sd."""
    if len(y) < 3:
        return 0.0
    d = np.diff(y)
    a = np.sort(np.abs(d - _median(d)))
    keep = max(1, int(round(len(a) * (1 - NOISE_TRIM))))
    return float(np.mean(a[:keep]) / TRIMMED_MEAN_ABS / np.sqrt(2.0))


def mad_noise(y: np.ndarray) -> float:
    """The point noise as read before issue 47's third round: the first differences' MAD, scaled to a normal's
    sd. The suspicious tail (shown, never an alert) keeps it, as it keeps the old autocorrelation reading: a
    reading that is more often low shows a change in the newest two points as early as before."""
    if len(y) < 3:
        return 0.0
    d = np.diff(y)
    return float(1.4826 * _median(np.abs(d - _median(d))) / np.sqrt(2.0))


def _median(a: np.ndarray) -> float:
    """``np.median`` of a short 1-D array, to the bit: the middle of the sorted values (the mean of the
    two middle ones), without the partition machinery that costs most of a small median's time."""
    s = np.sort(a)
    n = len(s)
    if n == 0 or np.isnan(s[-1]):  # np.median: nan for an empty array or any nan (sorted last)
        return float("nan")
    return float(s[n // 2]) if n % 2 else float((s[n // 2 - 1] + s[n // 2]) / 2)


def _relative(after: float, before: float) -> float:
    return after / before - 1.0 if before else (0.0 if after == before else float("inf"))


def _sides(y: np.ndarray, var: np.ndarray, mask: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per row of ``mask`` (one split each): the weighted mean of the masked points, each clipped to CLIP
    sd of their median (one stray night does not move it), the spread of their standardised residuals,
    the sum of their weights, and the sums a lag-1 autocorrelation of those residuals is made of (the
    products of neighbours, the squares)."""
    sd = np.sqrt(var)
    # The median of each row's masked points: masked-out values sort last (np.nanmedian is 20x slower here).
    ordered = np.sort(np.where(mask, y, np.inf), axis=1)
    count = mask.sum(axis=1)
    rows = np.arange(len(mask))
    med = ((ordered[rows, (count - 1) // 2] + ordered[rows, count // 2]) / 2)[:, None]
    z = np.clip(y, med - CLIP * sd, med + CLIP * sd)
    w = np.where(mask, 1.0 / var, 0.0)
    sw = w.sum(axis=1)
    mean = (w * z).sum(axis=1) / sw
    r = np.where(mask, (z - mean[:, None]) / sd, 0.0)
    spread = np.sqrt((r ** 2).sum(axis=1) / np.maximum(1, count - 1))
    lagged = np.where(mask[:, 1:] & mask[:, :-1], r[:, 1:] * r[:, :-1], 0.0).sum(axis=1)
    return mean, spread, sw, lagged, (r ** 2).sum(axis=1)


def _ar_widen(rho: np.ndarray | float, n: np.ndarray | int, bias: float = AR_BIAS) -> np.ndarray:
    """How much wider a mean's standard error is under noise correlated from night to night: sqrt((1 + rho) /
    (1 - rho)) for the residuals' lag-1 autocorrelation ``rho`` over ``n`` points (less AR_BIAS / sqrt(n)), in
    [0, AR_CAP]; 1 below AR_MIN points.
    A busy machine is busy for several nights: such noise wanders, and its wanders are neither steps nor
    drifts (issue 47's noisy stationary series: AR(1) at 0.6 raised 9 of their 18 false alarms)."""
    n = np.asarray(n, dtype=float)
    r = np.clip(np.asarray(rho, dtype=float) - bias / np.sqrt(np.maximum(n, 1.0)), 0.0, AR_CAP)
    r = np.where(n >= AR_MIN, r, 0.0)
    return np.sqrt((1 + r) / (1 - r))


def _splits(y: np.ndarray, var: np.ndarray, cuts: np.ndarray, bias: float = AR_BIAS, pooled: bool = True
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(z, level before, level after) of a step at each of ``cuts`` (indices into ``y``), every split at once.

    The before side reaches back at most MAX_BEFORE points; the after side runs to the newest. The
    noise model is scaled by the residuals' spread pooled over both sides (at least SPREAD_FLOOR); the
    after side's own spread counts when it is larger than the model's: a noise level that rises is
    not a step.
    """
    idx = np.arange(len(y))[None, :]
    c = cuts[:, None]
    before, after = (idx < c) & (idx >= c - MAX_BEFORE), idx >= c
    mb, sb, wb, lb, qb = _sides(y, var, before)
    ma, sa, wa, la, qa = _sides(y, var, after)
    nb, na = before.sum(axis=1), after.sum(axis=1)
    if pooled:
        spread = np.maximum(SPREAD_FLOOR, np.sqrt((qb + qa) / np.maximum(1, nb + na - 2)))
        se = np.sqrt(spread ** 2 / wb + np.maximum(spread, np.where(sa > 1.0, sa, 0.0)) ** 2 / wa)
    else:
        se = np.sqrt(np.maximum(1.0, sb) ** 2 / wb + np.maximum(1.0, sa) ** 2 / wa)
    return (ma - mb) / (se * _ar_split_widen((lb + la) / np.maximum(qb + qa, 1e-300), nb, na, bias)), mb, ma


def _ar_split_widen(rho: np.ndarray, nb: np.ndarray, na: np.ndarray, bias: float = AR_BIAS) -> np.ndarray:
    """How much wider the difference of a split's two means is under AR(1) noise than under independent noise,
    for ``nb`` points before the cut and ``na`` after it, each side contiguous: the exact variance of the
    difference (each side's own correlation, less the covariance across the cut), not the long-run widening
    sqrt((1 + rho) / (1 - rho)) that ``_ar_widen`` gives a mean of many points. Never below 1."""
    n = np.asarray(nb + na, dtype=float)
    r = np.clip(np.asarray(rho, dtype=float) - bias / np.sqrt(np.maximum(n, 1.0)), 0.0, AR_CAP)
    r = np.where(n >= AR_MIN, r, 0.0)
    b, a = np.asarray(nb, dtype=float), np.asarray(na, dtype=float)

    def own(m: np.ndarray) -> np.ndarray:  # the sum of rho^|i - j| over i, j of m consecutive points
        return m * (1 + r) / (1 - r) - 2 * r * (1 - r ** m) / (1 - r) ** 2

    across = r * (1 - r ** b) * (1 - r ** a) / (1 - r) ** 2
    var = own(a) / a ** 2 + own(b) / b ** 2 - 2 * across / (a * b)
    return np.sqrt(np.maximum(1.0, var / (1 / a + 1 / b)))


def _wls(design: np.ndarray, y: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Weighted least squares: (coefficients, their standard errors, RSS in units of the variance)."""
    w = 1.0 / var
    a = design * np.sqrt(w)[:, None]
    b = y * np.sqrt(w)
    coef, _, rank, _ = np.linalg.lstsq(a, b, rcond=None)
    resid = b - a @ coef
    rss = float(np.sum(resid ** 2))
    if rank < design.shape[1]:
        return coef, np.full(len(coef), np.inf), rss
    scale = max(1.0, rss / max(1, len(y) - design.shape[1]))  # never narrower than the noise model
    cov = np.linalg.inv(a.T @ a) * scale
    rho = float(np.sum(resid[1:] * resid[:-1])) / rss if rss > 0 else 0.0
    return coef, np.sqrt(np.diag(cov)) * float(_ar_widen(rho, len(y))), rss


def _step_rss(y: np.ndarray, w: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """The weighted RSS of a two-level fit (a step at each of ``cuts``), every split at once."""
    sw, swy = np.cumsum(w), np.cumsum(w * y)
    wb, yb = sw[cuts - 1], swy[cuts - 1]
    wa, ya = sw[-1] - wb, swy[-1] - yb
    return np.asarray(float(np.sum(w * y ** 2)) - yb ** 2 / wb - ya ** 2 / wa)


def _ramp_fit(y: np.ndarray, w: np.ndarray, min_width: int, start: int | None = None) -> tuple[float, int]:
    """The least weighted RSS of a ramp: one level, a straight slide over ``min_width`` or more points,
    another level (the slide may run to the newest point), every (start, end) at once, or every end
    from a given ``start``; and the first point at the second level (``len(y)`` when the slide runs to
    the newest)."""
    m = len(y)
    starts = np.arange(1, m) if start is None else np.array([start])
    k1, k2 = np.meshgrid(starts, np.arange(1, m + 1), indexing="ij")
    keep = k2 - k1 >= min_width
    k1, k2 = k1[keep], k2[keep]
    if not len(k1):
        return float("inf"), m
    t = np.arange(m, dtype=float)[None, :]
    r = np.clip((t - k1[:, None] + 1) / (k2 - k1 + 1)[:, None], 0.0, 1.0)
    q = 1.0 - r
    s00, s01, s11 = (w * q * q).sum(axis=1), (w * q * r).sum(axis=1), (w * r * r).sum(axis=1)
    t0, t1 = (w * y * q).sum(axis=1), (w * y * r).sum(axis=1)
    det = np.maximum(s00 * s11 - s01 * s01, 1e-300)
    explained = (s11 * t0 * t0 - 2 * s01 * t0 * t1 + s00 * t1 * t1) / det
    best = int(np.argmax(explained))
    return float(np.sum(w * y * y) - explained[best]), int(k2[best])


def _ramp_rss(y: np.ndarray, w: np.ndarray, min_width: int) -> float:
    """The least weighted RSS of a ramp (``_ramp_fit``)."""
    return _ramp_fit(y, w, min_width)[0]


def _hinge_fit(y: np.ndarray, w: np.ndarray, min_width: int) -> tuple[float, int]:
    """The least weighted RSS of a hinge: one level, then a straight slide over the newest ``min_width`` or
    more points that is still going (a ramp with no second level), every start at once; and its start
    (the first point off the level)."""
    m = len(y)
    k1 = np.arange(1, m - min_width + 1)
    if not len(k1):
        return float("inf"), m
    r = np.maximum(0.0, np.arange(m, dtype=float)[None, :] - k1[:, None] + 1)
    s00, s01, s11 = float(np.sum(w)), (w * r).sum(axis=1), (w * r * r).sum(axis=1)
    t0, t1 = float(np.sum(w * y)), (w * y * r).sum(axis=1)
    det = np.maximum(s00 * s11 - s01 * s01, 1e-300)
    explained = (s11 * t0 * t0 - 2 * s01 * t0 * t1 + s00 * t1 * t1) / det
    best = int(np.argmax(explained))
    return float(np.sum(w * y * y) - explained[best]), int(k1[best])


def _best_step_rss(y: np.ndarray, w: np.ndarray) -> float:
    """The least weighted RSS of a step anywhere with at least MIN_AFTER points each side."""
    cuts = np.arange(MIN_AFTER, len(y) - MIN_AFTER + 1)
    return float(np.min(_step_rss(y, w, cuts))) if len(cuts) else float("inf")


def large_level(before: Sequence[float] | np.ndarray) -> float:
    """The level a large change is measured from: the median of the newest LARGE_LEVEL points before it (a
    slide's newest points are near them, where the median of a long window would lag far behind)."""
    return _median(np.asarray(before[-LARGE_LEVEL:], dtype=float))


def large_band(before: Sequence[float] | np.ndarray, rule: Rule, trial_sd: float = 0.0) -> float | None:
    """How far from ``large_level(before)`` a point must be to count towards a large change, in the metric's
    units; None when ``before`` is too short to read a level from (or the level is 0)."""
    y = np.asarray(before, dtype=float)
    recent = y[-LARGE_LEVEL:]
    m = len(y)
    if len(recent) < LARGE_MIN_BEFORE:
        return None
    level = _median(recent)
    if not level or not np.isfinite(level):
        return None
    # A few points: their plain spread (a robust one of five points is too often far too small or too large);
    # enough for the noise model: the first differences' trimmed spread, which a slide does not widen.
    own, df = (noise(y), m - 1) if m >= MIN_BEFORE else (float(np.std(recent, ddof=1)), len(recent) - 1)
    # A spread read from few points may be far too small (two nights in one mode of a bimodal noise): widened by
    # Student's t over the normal at the same level, and by the level's own error, sqrt(1 + 1/n).
    widen = (_T_OVER_Z[df - 1] if df <= len(_T_OVER_Z) else 1 + 2.5 / df) * np.sqrt(1 + 1 / len(recent))
    return max(large_floor(rule, m) * abs(level), LARGE_Z * max(own, trial_sd) * widen)


# t(df).ppf(0.995) / norm.ppf(0.995) for df = 1..9 (scipy.stats; beyond, 1 + 2.5 / df is within 1%).
_T_OVER_Z = (24.71, 3.85, 2.27, 1.79, 1.57, 1.44, 1.36, 1.30, 1.26)


def large_floor(rule: Rule, points: int = 0) -> float:
    """The large band's floor, relative to the level, for a level read from ``points`` points of the segment:
    LARGE_FACTOR minimum effects (the metric's known noise) while the step rule cannot judge the segment
    yet, and at least LARGE_MATURE once it can (it confirms a change of the minimum effect on its fourth
    night, and holds back an excursion of up to three nights as a transient: only a change the size of half
    the level is worth raising before that)."""
    young = LARGE_FACTOR * rule.min_effect
    return young if points < MATURE_NIGHTS else max(young, LARGE_MATURE)


class Tracker:
    """The sequential detector: ``push`` one night's point (its value and trials) at a time."""

    # Class attributes so that a benchmark can score the rule before a change beside it, in one run.
    level_margin = LEVEL_MARGIN
    level_window = LEVEL_WINDOW

    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self.y: list[float] = []
        self.k: list[int] = []
        self.dev: list[float] = []  # every trial's deviation from its night's median, relative
        self.segment = 0  # first point after the last confirmed step
        self.findings: list[Finding] = []
        self.drift_named = False
        self._prev: tuple[int, float] | None = None  # last night's best split and its z
        self._prev_drift = 0.0
        self._sb2, self._sw2 = 0.0, 0.0
        self._noise_points = 0  # points tonight's noise model was read from
        self._pending: int | None = None  # the level change still to be named: its place in ``findings``
        self._level_lo = 0  # where the pending level change's window starts
        self._level_noise = (0.0, 0.0)  # the noise model (sb^2, sw^2) of the night it was raised
        self._renamed: list[tuple[str, int]] = []  # tonight's renames
        self._step_raised: int | None = None  # the night the newest change was raised, while it is a step

    def push(self, value: float, trials: Sequence[float] = ()) -> list[tuple[str, int]]:
        """Add a night; the changes confirmed on it, as (kind, index), and the changes renamed on it (a level
        change, or a step the level slid on after), as (RENAMED + new name, index)."""
        self._add(value, trials)
        self._fit_noise()
        self._close_drift()
        self._renamed = []
        self._decide_level()
        new = self._large()
        if new is None:
            new = self._step()
        if new is None:
            new = self._drift()
        out = [(RENAMED + kind, index) for kind, index in self._renamed]
        if new is None:
            return out
        self.findings.append(new)
        return [*out, (new.kind, new.index)]

    def _rename(self, name: str, evidence: str) -> None:
        """The pending level change named ``name`` in place, the night and the evidence kept."""
        assert self._pending is not None
        self._rename_at(self._pending, name, evidence)
        self._pending = None

    def _rename_at(self, place: int, name: str, evidence: str) -> None:
        """``findings[place]`` named ``name`` in place, the night and the evidence kept."""
        f = self.findings[place]
        self.findings[place] = replace(f, kind=name, names=(*f.names, (len(self.y) - 1, name, evidence)))
        self._renamed.append((name, f.index))
        if name == "drift":
            self.drift_named = True  # its segment's drift is this one: not raised again

    def _fits(self, c: int, lo: int, noise: tuple[float, float] | None = None) -> tuple[float, float, float]:
        """RSS (noise units) over [lo, newest] of a step at ``c``, of the best hinge (a slide still going)
        and of the best ramp of 2 * RAMP_MIN or more nights (a slide that stopped). ``noise``: (sb^2, sw^2)
        to weigh by instead of tonight's model."""
        n = len(self.y)
        sb2, sw2 = noise if noise is not None else (self._sb2, self._sw2)
        y, w = np.asarray(self.y[lo:n]), 1.0 / (sb2 + sw2 / np.asarray(self.k[lo:n], dtype=float))
        step = float(_step_rss(y, w, np.array([c - lo]))[0])
        hinge, ramp = _hinge_fit(y, w, RAMP_MIN)[0], _ramp_rss(y, w, 2 * RAMP_MIN)
        # In units of the spread the best of the three leaves, when wider than the noise model: noise that wanders
        # (AR(1)) is wider than its first differences say, and its RSS differences with it, which named a
        # drift under such noise a step by LEVEL_DECIDE units that were not there (quasi-likelihood, as _wls).
        scale = max(1.0, min(step, hinge, ramp) / max(1, len(y) - 4))
        return step / scale, hinge / scale, ramp / scale

    def _decide_level(self) -> None:
        """Rename the pending level change once the nights since tell a step from a drift."""
        if self._pending is None:
            return
        f = self.findings[self._pending]
        c = f.index
        after = len(self.y) - c
        # The window runs from the night it was raised: a change confirmed late (a short segment's raised threshold)
        # keeps its whole window to be named in.
        raised = f.names[0][0] if f.names else c + MIN_AFTER
        if len(self.y) - 1 - raised > self.level_window - MIN_AFTER:
            self._pending = None  # undecided in the window: it stays a level change
            return
        # Weighed by the noise of the night it was raised: after it, the segment's own noise model has only
        # the few nights since (a slide's), which would scale the RSS by whatever they happen to be.
        step, hinge, ramp = self._fits(c, self._level_lo, self._level_noise)
        evidence = f"RSS step {step:.1f}, slide going {hinge:.1f}, slide stopped {ramp:.1f} ({after} nights after)"
        if after < LEVEL_AFTER:
            return  # a few nights after a step, the start of a slide fits them too: that is why it was raised so
        if min(hinge, ramp) + LEVEL_DECIDE < step:
            self._rename("drift", evidence)
        elif step + LEVEL_DECIDE < min(hinge, ramp):
            self._rename("step", evidence)

    def _add(self, value: float, trials: Sequence[float]) -> None:
        """The night's point into the history, nothing decided (a restored tracker replays its nights so)."""
        self.y.append(float(value))
        vals = [float(t) for t in trials] or [float(value)]
        self.k.append(len(vals))
        if len(vals) > 1 and value:
            self.dev.extend((v - value) / abs(value) for v in vals)

    def _fit_noise(self, spread: Callable[[np.ndarray], float] = noise) -> None:
        """The night's noise model over the segment's newest points: trials within nights, nights between
        (``spread``: how the points' noise is read from them)."""
        hi = len(self.y)
        y = np.asarray(self.y[max(self.segment, hi - NOISE_WINDOW):hi])
        self._noise_points = len(y)
        level = _median(np.abs(y)) or 1.0
        sd_points = max(spread(y), NOISE_FLOOR * self.rule.min_effect * level, 1e-6 * level)
        self._sb2, self._sw2 = sd_points ** 2, 0.0
        if len(self.dev) >= 6:
            dev = np.asarray(self.dev[-6 * NOISE_WINDOW:])
            # A deviation from the night's own median is smaller than one from the level: 1.2 undoes that.
            self._sw2 = (1.4826 * _median(np.abs(dev)) * level * 1.2) ** 2
            kk = np.asarray(self.k[max(self.segment, hi - NOISE_WINDOW):hi], dtype=float)
            self._sb2 = max((1e-6 * level) ** 2, sd_points ** 2 - float(np.mean(self._sw2 / kk)))

    def _variances(self, lo: int, hi: int) -> np.ndarray:
        """Variance of each point in [lo, hi) from tonight's noise model."""
        return self._sb2 + self._sw2 / np.asarray(self.k[lo:hi], dtype=float)

    def _split(self, c: int, n: int, var: np.ndarray, lo: int) -> tuple[float, float, float]:
        """(z, level before, level after) of a step at ``c`` with the after side up to ``n``."""
        z, mb, ma = _splits(np.asarray(self.y[lo:n]), var, np.array([c - lo]))
        return float(z[0]), float(mb[0]), float(ma[0])

    def _scan(self, min_after: int) -> tuple[int, float, float, float] | None:
        """The split of the segment that fits best tonight (least squares: the likeliest place of one
        change) among those with ``min_after`` to MAX_AFTER points after: (index, z, level before, level after)."""
        n, lo = len(self.y), self.segment
        first = max(lo + MIN_BEFORE, n - MAX_AFTER)
        if n - min_after < first:
            return None
        w0 = max(lo, first - MAX_BEFORE)
        y, var = np.asarray(self.y[w0:n]), self._variances(w0, n)
        cuts = np.arange(first, n - min_after + 1) - w0
        # The z and levels of the best split only: each split's row is computed alone, so this is the
        # same figure the whole matrix of splits would give, at the cost of one row.
        c = cuts[int(np.argmin(_step_rss(y, 1 / var, cuts)))]
        z, mb, ma = _splits(y, var, np.array([c]))
        return int(c + w0), float(z[0]), float(mb[0]), float(ma[0])

    def _new_side(self, c: int, before: float, after: float) -> bool:
        """The newest point and most of the points since ``c`` are nearer the new level than the old."""
        mid = (before + after) / 2
        side = np.sign(after - before) * (np.asarray(self.y[c:]) - mid) > 0
        return bool(side[-1]) and float(np.mean(side)) >= NEW_SIDE_SHARE

    def _over_trend(self, c: int, sign: float) -> float:
        """t of a step at ``c`` fitted on top of a straight line over the segment, signed toward ``sign``."""
        n = len(self.y)
        lo = max(self.segment, n - DRIFT_WINDOW)
        x = np.arange(lo, n, dtype=float)
        y, var = np.asarray(self.y[lo:]), self._variances(lo, n)
        design = np.column_stack([np.ones(len(x)), x - x.mean(), (x >= c).astype(float)])
        coef, se, _ = _wls(design, y, var)
        return float(np.sign(sign) * coef[2] / se[2])

    def _without_newest(self, c: int) -> float:
        """z of the split at ``c`` without the newest two points: a change in the last two points is at
        most suspicious, and must not carry a split a few points earlier over the line on its own."""
        n = len(self.y) - 2
        lo = max(self.segment, c - MAX_BEFORE)
        if n - c < 1:
            return 0.0
        z, _, _ = _splits(np.asarray(self.y[lo:n]), self._variances(lo, n), np.array([c - lo]))
        return float(z[0])

    def _slope_before(self, c: int, sign: float) -> float:
        """t of the slope of the points before ``c``, signed toward ``sign``: a level already sliding that
        way before the supposed step is a drift the search cut."""
        return self._slope(max(self.segment, c - MAX_BEFORE), c, sign)

    def _slope(self, lo: int, hi: int, sign: float) -> float:
        """t of the slope of the points in [lo, hi), signed toward ``sign``."""
        x = np.arange(lo, hi, dtype=float)
        coef, se, _ = _wls(np.column_stack([np.ones(len(x)), x - x.mean()]), np.asarray(self.y[lo:hi]),
                           self._variances(lo, hi))
        return float(np.sign(sign) * coef[1] / se[1])

    def _ramp_fits_better(self, c: int) -> bool:
        """A ramp of RAMP_MIN or more nights fits the segment better than the step at ``c`` by RAMP_OVER_STEP
        (in units of the noise variance): a level that slides into its new place is drift, not a step."""
        n = len(self.y)
        lo = max(self.segment, n - DRIFT_WINDOW)
        y, w = np.asarray(self.y[lo:]), 1.0 / self._variances(lo, n)
        step = float(_step_rss(y, w, np.array([c - lo]))[0])
        return _ramp_rss(y, w, RAMP_MIN) + RAMP_OVER_STEP < step

    def _holds_drift(self) -> bool:
        """The segment holds a drift the tracker named (or a step's slide it took as that step's), not closed."""
        last = self.findings[-1] if self.findings else None
        return self.drift_named and last is not None and last.index == self.segment

    def _close_drift(self) -> None:
        """A named drift that has stopped ends its segment where its level settled: from then on a step is
        judged against the level the drift came to, not against the slide before it (which every slide
        test of the step rule would find, so that no step after a drift could be confirmed). The drift
        stays named: the segment's episode is closed, not re-opened (no drift is raised twice). Stopped:
        the best ramp from the start of the best slide still going (a hinge: the ramp with one parameter
        fewer) ends MIN_BEFORE or more points before the newest and fits better than the hinge by
        ``Z_DRIFT ** 2`` in units of the noise variance, the likelihood ratio of a one-parameter test at
        the drift rule's own z: a stop is as strict as the drift (a bar of RAMP_OVER_STEP closed slides
        that had only paused)."""
        if not self._holds_drift():
            return  # no drift in this segment, or its episode already closed
        n = len(self.y)
        lo = max(self.segment, n - DRIFT_WINDOW)
        y, w = np.asarray(self.y[lo:]), 1.0 / self._variances(lo, n)
        # The ramp from where the hinge starts the slide, not from every start: this runs every night a
        # drift is open, and every (start, end) of 80 points costs 30 ms where one start costs 0.5 ms.
        going, start = _hinge_fit(y, w, RAMP_MIN)
        if start >= len(y):
            return
        rss, end = _ramp_fit(y, w, RAMP_MIN, start)
        if n - (lo + end) < MIN_BEFORE or rss + Z_DRIFT ** 2 >= going:
            return
        self.segment, self._prev = lo + end, None

    def _step(self) -> Finding | None:
        # One search over splits with MIN_LOOK or more points after: a split forced to have MIN_AFTER
        # would pull the start of a three-night burst one point early and call it a step.
        best = self._scan(MIN_LOOK)
        prev, self._prev = self._prev, (best[0], best[1]) if best else None
        if best is None or len(self.y) - best[0] < MIN_AFTER:
            return None
        c, z, before, after = best
        effect = _relative(after, before)
        few = 1.0 + Z_DF / max(1, self._noise_points - 1)  # a noise read from few points: a t, not a z
        if (abs(z) < Z_STEP * few or abs(effect) < self.rule.min_effect or prev is None
                or abs(prev[0] - c) > 2 or abs(prev[1]) < Z_PREV * few or np.sign(prev[1]) != np.sign(z)):
            return None
        if not self._new_side(c, before, after) or np.sign(z) * self._without_newest(c) < Z_WITHOUT_NEWEST:
            return None
        if self._over_trend(c, z) < T_TREND or self._slope_before(c, z) >= SLIDE_T:
            return None
        if self._ramp_fits_better(c) or self._slope(c, len(self.y), z) >= SLIDE_AFTER_T:
            return None  # a slide that began near c and goes on: the drift rule names it, once
        if self._moves_on(c, z):
            return None  # the undecided level change, moving on the same way: renamed drift, not raised again
        if self._holds_drift() and np.sign(self.findings[-1].effect) == np.sign(z):
            return None  # the named drift, sliding on: the same episode (it closes once the slide stops)
        # A step the start of a slide still going fits about as well: raised as what the data can tell.
        lo = max(self.segment, c - MAX_BEFORE)
        step, hinge, _ = self._fits(c, lo)
        # Few points before it, no slide test can tell: a drift that began in the first nights of the segment
        # (a young series, or one a change reset) is confirmed as a step by then, so it is raised as what the data
        # can tell, and renamed when the nights do.
        level = hinge < step + self.level_margin or c - lo < LEVEL_SHORT
        self.segment, self.drift_named, self._prev = c, False, None
        if not level:
            self._pending = None  # a later change supersedes a level change still undecided
            self._step_raised = len(self.y) - 1
            return Finding("step", c, before, after, effect, None, self.rule.is_regression(effect), float(z))
        self._pending, self._level_lo, self._level_noise = len(self.findings), lo, (self._sb2, self._sw2)
        self._step_raised = None
        evidence = f"RSS step {step:.1f}, slide going {hinge:.1f} ({len(self.y) - c} nights after)"
        return Finding("level-change", c, before, after, effect, None, self.rule.is_regression(effect), float(z),
                       ((len(self.y) - 1, "level-change", evidence),))

    def _large(self) -> Finding | None:
        """A change far outside the large band on each of its LARGE_NIGHTS nights, however young the segment."""
        n = len(self.y)
        c = n - LARGE_NIGHTS
        lo = max(self.segment, c - MAX_BEFORE)
        if c - lo < LARGE_MIN_BEFORE:
            return None
        before = np.asarray(self.y[lo:c])
        band = large_band(before, self.rule, float(np.sqrt(self._sw2)))
        if band is None:
            return None
        level = large_level(before)
        off = np.asarray(self.y[c:]) - level
        if not (np.all(off > band) or np.all(off < -band)):
            return None
        after = float(np.mean(self.y[c:]))
        effect = _relative(after, level)
        self.segment, self.drift_named, self._prev, self._pending, self._step_raised = c, False, None, None, None
        return Finding(LARGE_CHANGE, c, level, after, effect, None, self.rule.is_regression(effect))

    def judgeable(self) -> float | None:
        """The smallest relative change the tracker would raise tomorrow on a segment this young: the large
        band over the segment's points, relative to their level; None when no change can be raised yet."""
        before = self.y[max(self.segment, len(self.y) - MAX_BEFORE):]
        band = large_band(before, self.rule, float(np.sqrt(self._sw2)))
        return None if band is None else band / abs(large_level(before))

    def _moves_on(self, c: int, z: float) -> bool:
        """A second change confirmed at ``c`` the same way as the level change still undecided before it (in
        its window): the level kept moving, which is what a slide does and a step does not, so the level
        change is renamed ``drift`` in place and the second change is not a second alert (a drift under
        noise shows as a staircase: seed set 1's -20% slide under 6% noise was raised at night 20 and
        again at night 42). The segment starts at ``c``: a later step is judged against the new level."""
        if self._pending is None or np.sign(self.findings[self._pending].effect) != np.sign(z):
            return False
        first = self.findings[self._pending].index
        self._rename("drift", f"moved on the same way: a second change {c - first} nights after it")
        self.segment, self._prev = c, None
        return True

    def _drift(self) -> Finding | None:
        n = len(self.y)
        lo = max(self.segment, n - DRIFT_WINDOW)
        if self.drift_named or n - lo < DRIFT_MIN_POINTS:
            return None
        y, var = np.asarray(self.y[lo:]), self._variances(lo, n)
        x = np.arange(n - lo, dtype=float)
        line = np.column_stack([np.ones(len(x)), x - x.mean()])
        coef, se, rss_line = _wls(line, y, var)
        t, prev = float(coef[1] / se[1]), self._prev_drift
        self._prev_drift = t
        first, last = coef[0] - coef[1] * x.mean(), coef[0] + coef[1] * (x[-1] - x.mean())
        effect = _relative(float(last), float(first))
        if abs(t) < Z_DRIFT or abs(prev) < Z_DRIFT or np.sign(prev) != np.sign(t) or abs(effect) < self.rule.min_effect:
            return None
        if _best_step_rss(y, 1 / var) < rss_line + DRIFT_OVER_STEP:
            return None  # one step fits better than the line: the step rule decides
        self.drift_named = True
        if self._pending is not None and self._continues_step(effect):
            self._rename("drift", f"drift rule t={t:+.1f} over the {n - lo} nights since")
            return None  # the level change that began the segment, sliding on: named, not raised again
        if self._continues_step(effect):
            self._step_slides_on(t, n - lo)
            return None  # the step that began the segment, still sliding the same way: the same change
        return Finding("drift", self.segment, float(first), float(last), effect, None,
                       self.rule.is_regression(effect), t)

    def _step_slides_on(self, t: float, nights: int) -> None:
        """The drift rule fired, the same way, in the segment the newest step began: in a level change's window
        (up to LEVEL_WINDOW - MIN_AFTER nights after its alert) the step is renamed ``drift`` in place (the level
        kept sliding after it, which a step does not), its first name kept first (the alert's fingerprint). Never
        a second alert: the first bad build is the step's."""
        raised, self._step_raised = self._step_raised, None
        if raised is None or len(self.y) - 1 - raised > self.level_window - MIN_AFTER:
            return
        place = len(self.findings) - 1  # the step that began the segment (``_continues_step``)
        f = self.findings[place]
        self.findings[place] = replace(f, names=((raised, f.kind, f"z={f.z:+.1f}"),))
        self._rename_at(place, "drift", f"drift rule t={t:+.1f} over the {nights} nights since")

    def _continues_step(self, effect: float) -> bool:
        """The segment began with a confirmed step the same way as ``effect``: a slide after it has the
        step's first bad build, which a person already has as an alert (and the store as an incident)."""
        last = self.findings[-1] if self.findings else None
        return (last is not None and last.kind in ("step", "level-change") and last.index == self.segment
                and np.sign(last.effect) == np.sign(effect))

    def suspicious(self) -> Finding | None:
        """The newest 1-3 points, if they sit apart from the level before them: never an alert."""
        n = len(self.y)
        self._fit_noise(mad_noise)
        # The newest k points with enough before them: a prefix of 1, 2, 3, since the room before shrinks with k.
        ks = [k for k in (1, 2, 3) if n - k - max(self.segment, n - k - MAX_BEFORE) >= MIN_BEFORE]
        if not ks:
            return None
        # One window for the three splits: each split's before side reaches back MAX_BEFORE points from its
        # own cut within it (``_splits``), which is the window each would have alone.
        lo = max(self.segment, n - ks[-1] - MAX_BEFORE)
        zs, befores, afters = _splits(np.asarray(self.y[lo:n]), self._variances(lo, n),
                                      np.array([n - k - lo for k in ks]), SUSPICIOUS_AR_BIAS, pooled=False)
        best: Finding | None = None
        for k, z, before, after in zip(ks, zs.tolist(), befores.tolist(), afters.tolist()):
            effect = _relative(after, before)
            if abs(z) >= SUSPICIOUS_Z and abs(effect) >= self.rule.min_effect and (best is None or abs(z) > abs(best.z)):
                best = Finding("suspicious", n - k, before, after, effect, None, self.rule.is_regression(effect), z)
        return best


def detect(values: Sequence[float], rule: Rule, trials: Sequence[Sequence[float]] | None = None) -> list[Finding]:
    """Every step, drift and level change the nightly confirmed over this history, night by night (as named
    now), and the suspicious tail now."""
    tracker = Tracker(rule)
    for i, v in enumerate(values):
        tracker.push(v, trials[i] if trials is not None else ())
    tail = tracker.suspicious()
    return [*tracker.findings, *([tail] if tail is not None else [])]
