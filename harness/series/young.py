"""Young series: a series with too few nights to judge a change of the size that matters says so.

Until a series has ``MATURE_NIGHTS`` nights the step rule cannot confirm a change of the metric's minimum
effect (it needs ``MIN_BEFORE`` nights before a change and ``MIN_AFTER`` after it); only a large change
(``steps`` rule 6) can be raised, and its band, relative to the level, is the smallest change the series can
judge tonight. That is said in the nightly's summary and on the dashboard ("5 nights: changes under 31%
cannot be judged yet") instead of silence and an empty noise column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.series.points import CasePoints, rule_for
from harness.series.steps import LARGE_MIN_BEFORE, LARGE_NIGHTS, MATURE_NIGHTS, Rule, Tracker

__all__ = ["Young", "YoungCase", "young_cases", "young_metric", "young_series"]


@dataclass(frozen=True)
class Young:
    """One metric's series that is still young: its nights, and the smallest change it can judge now."""

    metric: str
    nights: int
    smallest: float | None  # relative; None: no change can be judged yet

    @property
    def text(self) -> str:
        """``5 nights: changes under 31% cannot be judged yet``."""
        nights = f"{self.nights} night" + ("" if self.nights == 1 else "s")
        if self.smallest is None:
            return (f"{nights}: no change can be judged yet (a large change needs {LARGE_MIN_BEFORE} nights before it "
                    f"and {LARGE_NIGHTS} after)")
        if self.smallest >= 1:  # a fall can be no larger than the level: none could be told from these nights
            return f"{nights}: no change can be judged yet (the nights differ by as much as their level)"
        return f"{nights}: changes under {self.smallest:.0%} cannot be judged yet"


def young_metric(metric: str, rule: Rule, values: Sequence[float], trials: Sequence[Sequence[float]]) -> Young | None:
    """``metric``'s series when it is young (fewer than MATURE_NIGHTS points), else None."""
    if not values or len(values) >= MATURE_NIGHTS:
        return None
    tracker = Tracker(rule)
    for value, night in zip(values, trials):
        tracker.push(value, night)
    return Young(metric, len(values), tracker.judgeable())


def young_series(cp: CasePoints, tolerances: Mapping[str, float] | None = None) -> list[Young]:
    """Every judged metric of the case whose series is young, in the case's metric order."""
    out = []
    for metric in cp.metric_names:
        rule = rule_for(metric, tolerances)
        known = cp.series_columns(metric)
        if rule is None or known is None or len(known.values) >= MATURE_NIGHTS:
            continue  # read as lists only where young: a year of nights is judged by its length alone
        _, values = cp.series(metric)
        got = young_metric(metric, rule, values, cp.trials(metric))
        if got is not None:
            out.append(got)
    return out


@dataclass(frozen=True)
class YoungCase:
    """A case whose judged series are young: one line of the nightly's summary."""

    scenario: str
    case: str
    hardware: str
    series: tuple[Young, ...]

    def describe(self, shown: int = 4) -> str:
        """``YOUNG scenario [case] on hardware: 5 nights: changes under 31% in output_throughput_tok_s, ...``."""
        judged = sorted((y for y in self.series if y.smallest is not None and y.smallest < 1),
                        key=lambda y: y.smallest or 0.0)
        head = f"YOUNG {self.scenario} [{self.case}] on {self.hardware}: "
        if not judged:
            return head + self.series[0].text
        nights = judged[0].text.split(":")[0]
        parts = [f"{y.smallest:.0%} in {y.metric}" for y in judged[:shown]]
        more = f" (and {len(judged) - shown} more metric(s))" if len(judged) > shown else ""
        return (f"{head}{nights}: changes under {', '.join(parts)}{more} cannot be judged yet; a change of the "
                f"minimum effect from {MATURE_NIGHTS} nights on")


def young_cases(cases: Sequence[CasePoints], tolerances: Mapping[str, Mapping[str, float]] | None = None
                ) -> tuple[YoungCase, ...]:
    """The cases with a young judged series, each with them (``tolerances`` by scenario, as the review takes them)."""
    out = []
    for cp in cases:
        found = young_series(cp, (tolerances or {}).get(cp.scenario))
        if found:
            out.append(YoungCase(cp.scenario, cp.case, cp.hardware, tuple(found)))
    return tuple(out)
