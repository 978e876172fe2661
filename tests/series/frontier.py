"""The plain scans the held-out step goal is read against: what one statistic a night raises within 5 nights.

Issue 47 asks the nightly for steps of 2.5-4x the noise within 5 nights (11 of 12) at no more than 2 false
alarms per 24 stationary series of seven noise shapes. ``Scan`` is the reference that goal is read against:
the textbook two-sample scan, with none of the tracker's other duties. Each night, over the splits with ``MIN_LOOK``
to ``MAX_AFTER`` points after (``MAX_BEFORE`` before at most, as the tracker's), the split of largest ``|t|``
(raised only with ``MIN_AFTER`` points after it, as the tracker's): the difference of the two sides' means over
their pooled residual sd (level and noise read from the segment, as any detector must read them). It raises a step
the first night ``|t| >= threshold`` and the change is past the minimum effect, and starts its segment there. No
second night, no test of a slide, no level change: a drift it sees is raised as a step, which the tracker must not
do. So it is the reference for what one threshold on one statistic a night gives on these shapes, free of the
tracker's costs and duties; not a detector to ship.

``rho`` > 0: the oracle variant. Told the noise's lag-1 autocorrelation (only a simulation knows it), it fits the
split by generalised least squares on the prewhitened points (Prais-Winsten), the most a detector could make of
AR(1) noise with the level and sd still read from the data. ``rho`` < 0: the same fit with the autocorrelation
read from each split's own residuals (in [0, ``AR_CAP``], from ``AR_MIN`` points), as a detector would have to.

``threshold_for``: the smallest threshold (bisected on a grid of 0.05) at which no set's stationary series raise
more than ``per_set`` alerts: chosen on the tune sets, then read on the report sets, as the tracker's constants were.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from harness.series import steps
from tests.series.grid import GridHistory
from tests.series.scoring import Outcome, score_history

__all__ = ["Scan", "oracle_rho", "score_scan", "threshold_for"]


def oracle_rho(history: GridHistory) -> float:
    """The lag-1 autocorrelation the held-out generator gave this history's noise (``tests.series.heldout``)."""
    return {"ar1": 0.6, "ar1-long": 0.85}.get(history.family, 0.0)


class Scan:
    """One statistic a night: the best split's two-sample t (``rho`` > 0: its GLS t under known AR(1))."""

    def __init__(self, threshold: float, min_effect: float, rho: float = 0.0) -> None:
        self.threshold, self.min_effect, self.rho = threshold, min_effect, rho
        self.y: list[float] = []
        self.segment = 0

    def push(self, value: float, trials: Sequence[float] = ()) -> list[tuple[str, int]]:
        self.y.append(float(value))
        n, lo = len(self.y), self.segment
        best: tuple[float, int, float] | None = None  # (|t|, cut, effect)
        # Splits with MIN_LOOK points after are looked at too, as the tracker does: a three-night burst is best
        # split where it starts, not a night early with one point before it taken for the new level.
        for c in range(max(lo + steps.MIN_BEFORE, n - steps.MAX_AFTER), n - steps.MIN_LOOK + 1):
            y = np.asarray(self.y[max(lo, c - steps.MAX_BEFORE):n])
            cut = len(y) - (n - c)
            t = self._t(y, cut)
            if best is None or abs(t) > best[0]:
                before = float(np.mean(y[:cut]))
                best = (abs(t), c, float(np.mean(y[cut:])) / before - 1 if before else 0.0)
        if best is None or n - best[1] < steps.MIN_AFTER or best[0] < self.threshold or abs(best[2]) < self.min_effect:
            return []
        self.segment = best[1]
        return [("step", best[1])]

    def _t(self, y: np.ndarray, cut: int) -> float:
        step = (np.arange(len(y)) >= cut).astype(float)
        design = np.column_stack([np.ones(len(y)), step])
        r = self.rho
        if r < 0:  # read from the split's own residuals
            coef, _, _, _ = np.linalg.lstsq(design, y, rcond=None)
            e = y - design @ coef
            r = float(np.clip((e[1:] @ e[:-1]) / (e @ e), 0.0, steps.AR_CAP)) if len(y) >= steps.AR_MIN and e @ e > 0 else 0.0
        if r > 0:  # Prais-Winsten: the first point scaled by sqrt(1 - r^2), each later one less r times the last
            def whiten(v: np.ndarray) -> np.ndarray:
                out = v.copy()
                out[1:] = v[1:] - r * v[:-1]
                out[0] = v[0] * np.sqrt(1 - r * r)
                return out
            y, design = whiten(y), np.column_stack([whiten(design[:, 0]), whiten(design[:, 1])])
        coef, _, _, _ = np.linalg.lstsq(design, y, rcond=None)
        resid = y - design @ coef
        sd = np.sqrt(float(resid @ resid) / (len(y) - 2))
        if sd == 0:
            return 0.0
        return float(coef[1] / (sd * np.sqrt(np.linalg.inv(design.T @ design)[1, 1])))


def score_scan(histories: Iterable[GridHistory], threshold: float, min_effect: float, oracle: bool | None = False
               ) -> list[Outcome]:
    """Each history scored as the tracker is (``tests.series.scoring``), by a fresh ``Scan``: ``oracle`` True, told
    the noise's autocorrelation; None, reading it from each split's residuals; False, the plain t."""
    return [score_history(h, _maker(threshold, min_effect, -1.0 if oracle is None else oracle_rho(h) if oracle else 0.0))
            for h in histories]


def _maker(threshold: float, min_effect: float, rho: float) -> Callable[[], Scan]:
    return lambda: Scan(threshold, min_effect, rho)


def threshold_for(sets: Sequence[Sequence[GridHistory]], min_effect: float, per_set: int = 2, oracle: bool | None = False,
                  low: float = 2.0, high: float = 12.0) -> float:
    """The smallest threshold (multiple of 0.05 in [low, high]) at which no set's stationary histories raise more
    than ``per_set`` alerts, by bisection. Until a series' first alert its nights' best |t| do not depend on the
    threshold, so whether it raises anything is monotone in it; a second alert may break that, and then the
    bisection still returns a threshold that meets the bound (it only ever returns one it checked)."""
    stationary = [[h for h in s if h.kind == "stationary"] for s in sets]

    def ok(th: float) -> bool:
        return all(sum(len(o.alerts) for o in score_scan(s, th, min_effect, oracle)) <= per_set for s in stationary)

    lo, hi = int(round(low / 0.05)), int(round(high / 0.05))
    if not ok(hi * 0.05):
        raise ValueError(f"no threshold up to {high} keeps every set's stationary false alarms to {per_set}")
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid * 0.05):
            hi = mid
        else:
            lo = mid + 1
    return round(hi * 0.05, 2)
