"""A metric's level on each side of a change, as a report states it: the mean and its 95% interval."""

from __future__ import annotations

import math
from collections.abc import Sequence

from harness.records.metric_definitions import figure
from harness.upstream.finding import ChartGroup, Interval, MetricChange

__all__ = ["interval", "metric_change"]


def interval(values: Sequence[float], trials: int | None = None) -> Interval:
    """Student's t interval of the mean of ``values`` (one per night, or per trial); a single value is its own
    interval. ``trials``: the runs under the values (default: one each)."""
    n = len(values)
    if n == 0:
        raise ValueError("a level needs at least one value")
    mean = math.fsum(values) / n
    if n == 1:
        return Interval(mean, mean, mean, 1, trials or 1)
    from scipy.stats import t

    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = float(t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n, trials or n)


def metric_change(name: str, before: Sequence[ChartGroup], after: Sequence[ChartGroup], rests_on: str) -> MetricChange:
    """The change of ``name`` from the groups ``before`` to the groups ``after``: each group (a night, a role's trials
    taken one by one when a group holds one trial each) gives its mean."""
    def level(groups: Sequence[ChartGroup]) -> Interval:
        if len(groups) == 1:  # one group: its trials are the points (a comparison's role)
            return interval(groups[0].values)
        means = [math.fsum(g.values) / len(g.values) for g in groups if g.values]
        return interval(means, sum(len(g.values) for g in groups))

    old, new = level(before), level(after)
    entry = figure(name)
    return MetricChange(metric=name, label=entry.label if entry else name, unit=entry.unit if entry else "",
                        higher_is_better=entry.higher_is_better if entry else True, before=old, after=new,
                        effect=(new.mean / old.mean - 1.0) if old.mean else math.nan, rests_on=rests_on)
