"""Transients: an excursion of one to K nights off a series' level that came back, seen the night it does.

An incident closes as ``recovered`` once its series is back at its old level for ``K`` nights; the
same ``K`` bounds a transient: a run of at most ``K`` nights beyond ``SUSPICIOUS_Z`` point-noise sd
from the median of the nights before it (and past the metric's minimum effect), followed by a night
back within that band. The step rule can never confirm such a run (it needs ``MIN_AFTER`` = K + 1
nights on the new side), so a transient is recorded in the store for the record and reaches no one.
It is judged on the newest night only: a nightly sees each excursion end once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from harness.series.steps import MAX_BEFORE, MIN_BEFORE, SUSPICIOUS_Z, Finding, Rule, noise

__all__ = ["K_NIGHTS", "transient_at_end"]

K_NIGHTS = 3  # K: nights back at the old level that resolve an incident; the longest transient


def transient_at_end(values: Sequence[float], rule: Rule, since: int = 0) -> Finding | None:
    """The excursion that ended on the newest night (the newest value is back), or None. ``since``: the first
    value of the level it is judged against (the first after the series' newest change): a level from before a
    change, or from a slide's first nights, would make a night on the new level an excursion."""
    y = np.asarray(values, dtype=float)
    n = len(y)
    for k in range(1, K_NIGHTS + 1):
        start = n - 1 - k  # the first night off
        lo = max(since, start - MAX_BEFORE)
        if start - lo < MIN_BEFORE:
            continue
        before = y[lo:start]
        level, sd = float(np.median(before)), noise(before)
        if sd <= 0 or not level:
            continue
        run = y[start:n - 1]
        sign = float(np.sign(run[0] - level))
        band = SUSPICIOUS_Z * sd
        off = bool(np.all(sign * (run - level) >= band)) and bool(np.all(np.abs(run / level - 1) >= rule.min_effect))
        if off and abs(y[-1] - level) < band and abs(y[start - 1] - level) < band:
            after = float(np.mean(run))
            effect = after / level - 1
            return Finding("transient", start, level, after, effect, None, rule.is_regression(effect),
                           (after - level) / sd)
    return None
