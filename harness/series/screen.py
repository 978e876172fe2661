"""Screening every series at once: the nights on which the sequential detector could decide something.

``steps.Tracker`` replays a series night by night, a few dozen small numpy calls a night: a year of
1400 series is half a million nights, minutes of CPU. On almost every night nothing can be decided:
a step needs the best split's ``|z| >= Z_STEP`` with ``MIN_AFTER`` points after it, a drift a line's
``|t| >= Z_DRIFT``, a large change its two newest points far from the level before them. While a series
has no finding (its segment starts at its first point), what the tracker computes on a night depends on
that night's points only, so every (series, night) is a row of its own, and all rows are computed at
once here: the noise model, the best split and its z, the drift's t, the large change's distance, as
the tracker computes them (single-trial points, where a point's variance is the noise model's alone).

These figures are a filter, never a verdict. A night is *hot* when it might decide: ``|z|`` or
``|t|`` within ``MARGIN`` of its threshold, or two splits fitting so nearly alike that the tracker's
choice between them is not certain here. ``replay`` then runs the real tracker on the hot nights
(and the night before each, whose best split the hot night compares with), adds the other nights'
points without deciding anything (nothing can be decided there), and replays every night in full
after a finding (the segment moved: the rows no longer describe the tracker). The tracker's state
after the last night is the one a full replay leaves (the last night is always pushed), so its
findings, its suspicious tail and the state cached in the store are the same bits.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from harness.series import steps
from harness.series.points import Trials
from harness.series.steps import Rule, Tracker

__all__ = ["MARGIN", "add_points", "hot_nights", "replay"]

# Far wider than the rounding between these figures and the tracker's (about 1e-12): a night this
# close to a threshold is decided by the tracker itself.
MARGIN = 1e-6
_WIDTH = max(steps.DRIFT_WINDOW, steps.MAX_BEFORE + steps.MAX_AFTER, steps.NOISE_WINDOW)  # points a row reads
_CHUNK_ROWS = 20_000  # rows (series-nights) per step: 20k x 80 floats, about 13 MB an array


def _at_most_one_trial(trials: Sequence[Sequence[float]], lo: int = 0, hi: int | None = None) -> bool:
    """Every point in [lo, hi) of at most one trial: from the counts when the trials are a series' arrays."""
    if isinstance(trials, Trials):
        return int(trials.counts[lo:hi].max(initial=0)) <= 1
    return all(len(t) <= 1 for t in trials[lo:hi])


def screenable(trials: Sequence[Sequence[float]], values: Sequence[float]) -> bool:
    """Every point one trial (the noise model has no within-night part) and finite."""
    return _at_most_one_trial(trials) and bool(np.all(np.isfinite(np.asarray(values, dtype=float))))


def _sorted_median(sorted_rows: np.ndarray, count: np.ndarray) -> np.ndarray:
    """The median of each row's first ``count`` values (the rows sorted, the rest after them)."""
    rows = np.arange(len(sorted_rows))
    c = np.maximum(count, 1)
    return (sorted_rows[rows, (c - 1) // 2] + sorted_rows[rows, c // 2]) / 2


def _noise_sd(w: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``Tracker._fit_noise`` of single-trial points: the points' sd over the newest NOISE_WINDOW
    (``w``: those points, nan before the first)."""
    cnt = np.minimum(n, steps.NOISE_WINDOW)
    level = _sorted_median(np.sort(np.abs(w), axis=1), cnt)  # nan (before the first point) sorts last
    level = np.where(level == 0, 1.0, level)
    d = np.diff(w, axis=1)
    md = _sorted_median(np.sort(d, axis=1), cnt - 1)
    # steps.noise: the mean of the smallest round((cnt - 1) * (1 - NOISE_TRIM)) deviations (nan sorts last).
    dev = np.sort(np.abs(d - md[:, None]), axis=1)
    keep = np.maximum(1, np.round((cnt - 1) * (1 - steps.NOISE_TRIM)).astype(int))
    total = np.nancumsum(dev, axis=1)[np.arange(len(dev)), np.minimum(keep, dev.shape[1]) - 1]
    sd = np.where(cnt >= 3, total / keep / steps.TRIMMED_MEAN_ABS / np.sqrt(2.0), 0.0)
    return np.maximum(sd, 1e-6 * level)


def _side(y: np.ndarray, mask: np.ndarray, sd: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``steps._sides`` with equal weights: clipped mean, spread of the standardised residuals, count."""
    cnt = mask.sum(axis=1)
    med = _sorted_median(np.sort(np.where(mask, y, np.inf), axis=1), cnt)[:, None]
    z = np.where(mask, np.minimum(np.maximum(y, med - steps.CLIP * sd[:, None]), med + steps.CLIP * sd[:, None]), 0.0)
    mean = z.sum(axis=1) / cnt
    r = np.where(mask, (z - mean[:, None]) / sd[:, None], 0.0)
    return mean, np.sqrt((r * r).sum(axis=1) / np.maximum(1, cnt - 1)), cnt


class _Sums:
    """Prefix sums of each series' points (less its first point: the sums of a window stay small beside its
    spread), over the flat array of padded series: a window's sum is two lookups."""

    def __init__(self, flat: np.ndarray) -> None:
        y = np.nan_to_num(flat)
        q = np.arange(len(y), dtype=float)
        self.s1 = np.concatenate([[0.0], np.cumsum(y)])
        self.s2 = np.concatenate([[0.0], np.cumsum(y * y)])
        self.sq = np.concatenate([[0.0], np.cumsum(q * y)])

    def window(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sum of y, of y^2 and of (flat index) * y over [lo, hi)."""
        return self.s1[hi] - self.s1[lo], self.s2[hi] - self.s2[lo], self.sq[hi] - self.sq[lo]


def _step_hot(flat: np.ndarray, sums: _Sums, end: np.ndarray, n: np.ndarray, sd: np.ndarray,
              ref: np.ndarray) -> np.ndarray:
    """Rows whose best split (``Tracker._scan(MIN_LOOK)``) might be confirmed, or is not certain here.
    ``end``: the flat index after the row's newest point; ``ref``: what the sums were taken less of."""
    first = np.maximum(steps.MIN_BEFORE, n - steps.MAX_AFTER)
    start = np.maximum(0, first - steps.MAX_BEFORE)  # the scan's window: [start, n)
    total, squares, _ = sums.window(end - (n - start), end)
    after = np.arange(steps.MIN_LOOK, steps.MAX_AFTER + 1)  # points after the cut
    tail = np.stack([sums.window(end - a, end)[0] for a in after], axis=1)
    cb = ((n - start)[:, None] - after[None, :]).astype(float)
    ok = (n[:, None] - after[None, :]) >= first[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        rss = np.where(ok, squares[:, None] - (total[:, None] - tail) ** 2 / cb - tail ** 2 / after[None, :], np.inf)
        order = np.argsort(rss, axis=1)
        rows = np.arange(len(rss))
        best, second = rss[rows, order[:, 0]], rss[rows, order[:, 1]]
        has = np.isfinite(best)
        # The tracker's sums are of the raw values: its rounding grows with their squares, not the spread's.
        raw = squares + 2 * ref * total + (n - start) * ref * ref
        unsure = has & ~(second - best > 1e-9 * np.maximum(raw, 1.0))
    a = after[order[:, 0]]
    cut = end - a
    before = cut[:, None] - steps.MAX_BEFORE + np.arange(steps.MAX_BEFORE)[None, :]
    yb = flat[before]
    ya = flat[np.minimum(cut[:, None] + np.arange(steps.MAX_AFTER)[None, :], len(flat) - 1)]
    with np.errstate(divide="ignore", invalid="ignore"):
        mb, sb, nb = _side(yb, ~np.isnan(yb), sd)
        ma, sa, na = _side(ya, np.arange(steps.MAX_AFTER)[None, :] < a[:, None], sd)
        squares = sb ** 2 * np.maximum(1, nb - 1) + sa ** 2 * np.maximum(1, na - 1)  # steps._sides' sums of squares
        spread = np.maximum(steps.SPREAD_FLOOR, np.sqrt(squares / np.maximum(1, nb + na - 2)))
        # Without the after side's own spread where it is wider than the model (steps._splits): this sd may sit
        # under the tracker's (its floor is lower), which would count that spread where the tracker does not; left
        # out, the se is never wider than the tracker's, so |z| stays an upper bound.
        se = sd * spread * np.sqrt(1 / nb + 1 / na)
        z = (ma - mb) / se
    could = (a >= steps.MIN_AFTER) & ~(np.abs(z) < steps.Z_STEP * (1 - MARGIN))
    return has & (unsure | could)


def _drift_hot(sums: _Sums, end: np.ndarray, n: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """Rows whose line over the segment's newest DRIFT_WINDOW points (``Tracker._drift``: equal weights, so
    least squares) has ``|t|`` near Z_DRIFT or beyond."""
    m = np.minimum(n, steps.DRIFT_WINDOW)
    sy, syy, sqy = sums.window(end - m, end)
    mf = m.astype(float)
    sxy = sqy - (end - m) * sy - (mf - 1) / 2 * sy  # x from 0 at the window's first point, centred
    sxx = mf * (mf * mf - 1) / 12
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = sxy / sxx
        rss = np.maximum(0.0, syy - sy * sy / mf - slope * slope * sxx) / sd ** 2
        scale = np.maximum(1.0, rss / np.maximum(1.0, mf - 2))
        t = slope / np.sqrt(scale * sd ** 2 / sxx)
    return (n >= steps.DRIFT_MIN_POINTS) & ~(np.abs(t) < steps.Z_DRIFT * (1 - MARGIN))


def _large_hot(flat: np.ndarray, end: np.ndarray, n: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """Rows whose newest LARGE_NIGHTS points might make a large change (``Tracker._large``): each beyond the
    band's floor (``floor``: relative, the row's series' ``steps.large_floor``) from the median of the
    LARGE_LEVEL points before them, the same way. The band is never narrower than its floor."""
    c = n - steps.LARGE_NIGHTS
    m = np.clip(c, 0, steps.LARGE_LEVEL)
    before = flat[end[:, None] - steps.LARGE_NIGHTS - steps.LARGE_LEVEL + np.arange(steps.LARGE_LEVEL)[None, :]]
    level = _sorted_median(np.sort(before, axis=1), m)  # nan (before the first point) sorts last
    new = flat[end[:, None] - steps.LARGE_NIGHTS + np.arange(steps.LARGE_NIGHTS)[None, :]] - level[:, None]
    with np.errstate(invalid="ignore"):
        far = np.abs(new).min(axis=1) >= floor * np.abs(level) * (1 - MARGIN)
        same = np.all(new > 0, axis=1) | np.all(new < 0, axis=1)
    return (m >= steps.LARGE_MIN_BEFORE) & far & same


def hot_nights(series: Sequence[np.ndarray], floors: Sequence[float] | None = None) -> list[np.ndarray]:
    """Per series (single-trial, finite values): the point indices whose push might decide something
    while the series has no finding. ``floors``: each series' large-change floor (``steps.large_floor`` of
    its rule); none given, every night that a large change of any size could end is hot."""
    lengths = [len(s) for s in series]
    if not series:
        return []
    # Rows: (series, night). The series lie in one flat array, each after WIDTH nan, so that a row's
    # window of up to WIDTH points never reaches into the series before.
    pad = np.full(_WIDTH, np.nan)
    flat = np.concatenate([x for s in series for x in (pad, np.asarray(s, dtype=float))])
    base = np.cumsum([0, *((_WIDTH + k) for k in lengths)])[:-1] + _WIDTH
    ref = np.repeat([float(s[0]) if len(s) else 0.0 for s in series], [_WIDTH + k for k in lengths])
    sums = _Sums(flat - ref)
    owner = np.repeat(np.arange(len(series)), lengths)
    floor_of = np.asarray(floors if floors is not None else [0.0] * len(series), dtype=float)
    night = np.concatenate([np.arange(k) for k in lengths])
    hot = np.zeros(len(owner), dtype=bool)
    for lo in range(0, len(owner), _CHUNK_ROWS):
        o, j = owner[lo:lo + _CHUNK_ROWS], night[lo:lo + _CHUNK_ROWS]
        end, n = base[o] + j + 1, j + 1
        sd = _noise_sd(flat[end[:, None] - steps.NOISE_WINDOW + np.arange(steps.NOISE_WINDOW)[None, :]], n)
        hot[lo:lo + _CHUNK_ROWS] = (_step_hot(flat, sums, end, n, sd, ref[end - 1]) | _drift_hot(sums, end, n, sd)
                                    | _large_hot(flat, end, n, floor_of[o]))
    bounds = np.cumsum([0, *lengths])
    return [night[bounds[i]:bounds[i + 1]][hot[bounds[i]:bounds[i + 1]]] for i in range(len(series))]


def add_points(tracker: Tracker, values: Sequence[float], trials: Sequence[Sequence[float]], lo: int, hi: int) -> None:
    """``tracker._add`` of the points in [lo, hi), nothing decided: the same lists, extended at once when
    every point there is one trial (a year of series is half a million points to add)."""
    if _at_most_one_trial(trials, lo, hi):
        # _add of a single-trial point: its value as a float, one trial, no within-night deviation.
        tracker.y.extend([float(v) for v in values[lo:hi]])
        tracker.k.extend([1] * (hi - lo))
        return
    for p in range(lo, hi):
        tracker._add(values[p], trials[p])


def _quiet(tracker: Tracker) -> bool:
    """Nothing but its segment's points decides the tracker's next nights: no level change pending (its window
    reads points before the segment) and no named drift still open (its stop is tested every night)."""
    return tracker._pending is None and not tracker._holds_drift()


def _segment_hot(rule: Rule, values: Sequence[float], segment: int) -> list[int]:
    """The hot nights of the points from ``segment`` on, screened as a series of their own (what the tracker
    decides there reads no point before its segment), as indices of the whole series."""
    suffix = np.asarray(values[segment:], dtype=float)
    return [segment + int(h) for h in hot_nights([suffix], [steps.large_floor(rule)])[0]]


def replay(rule: Rule, values: Sequence[float], trials: Sequence[Sequence[float]], hot: np.ndarray) -> Tracker:
    """The tracker after every point, as ``steps.detect`` leaves it, pushing only where it might decide.

    After a night that moves the segment (a finding, a drift's stop, a level change moving on), every night is
    pushed until the tracker is quiet again; then the nights from its segment on are screened anew, as a series
    of their own (a year with a finding in its first month was otherwise pushed night by night to its end)."""
    tracker = Tracker(rule)
    n, done = len(values), 0
    nights, k = [int(h) for h in hot], 0
    while k < len(nights):
        j = nights[k]
        k += 1
        if j < done:
            continue
        segment, found = tracker.segment, len(tracker.findings)
        add_points(tracker, values, trials, done, j - 1)
        if j - 1 >= done:
            tracker.push(values[j - 1], trials[j - 1])  # the night before: its best split, as the tracker had it
        tracker.push(values[j], trials[j])
        done = j + 1
        if tracker.segment == segment and len(tracker.findings) == found and _quiet(tracker):
            continue
        while done < n and not _quiet(tracker):  # the segment moved: the screen's rows say nothing more
            tracker.push(values[done], trials[done])
            done += 1
        if done >= n:
            return tracker
        nights, k = _segment_hot(rule, values, tracker.segment), 0
    if done < n:
        add_points(tracker, values, trials, done, n - 1)
        tracker.push(values[n - 1], trials[n - 1])
    return tracker
