"""Judging a run's trials against a recorded baseline: a one-sided test at a stated false-failure rate.

The question a baseline check asks is "is this build's figure lower than the baseline's?", with the
answer wrong (a failure of an unchanged build) at most ``rate`` of the time. The test is Student's
two-sample t test, pooled, one-sided:

- the baseline holds ``n_ref`` trials' mean and sample standard deviation; the run gives ``n`` trials;
- under "unchanged build" both sets of trials are draws of one distribution, which is exactly what the
  pooled test assumes (equal variances); Welch's test would spend degrees of freedom on a difference
  of variances the null does not have, and with the 3 trials of a pull request's run its band is wide;
- the band is ``mean_ref - t(1 - rate, n_ref + n - 2) * s_pooled * sqrt(1/n_ref + 1/n)``; the check
  fails when the run's mean is below it.

Where both spreads are zero (a deterministic model on a quiet machine), the standard error is zero and
any drop would fail: the spread is floored at :data:`SD_FLOOR_REL` of the baseline's mean (a figure's
last printed digit), so a rounding difference is not a regression; documented in docs/baselines.md.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["DEFAULT_FALSE_FAILURE_RATE", "SD_FLOOR_REL", "Band", "Summary", "band", "summarise"]

DEFAULT_FALSE_FAILURE_RATE = 0.01
SD_FLOOR_REL = 1e-4


@dataclass(frozen=True)
class Summary:
    """Trials of one figure: their count, mean and sample standard deviation (0 for one trial)."""

    n: int
    mean: float
    sd: float


def summarise(values: Sequence[float]) -> Summary | None:
    """The summary of ``values`` (finite numbers only), or None when there are none."""
    xs = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not xs:
        return None
    mean = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
    return Summary(len(xs), mean, sd)


@dataclass(frozen=True)
class Band:
    """The lower edge a run's mean must reach, and how it was derived."""

    lower: float
    baseline: Summary
    measured: Summary
    rate: float
    t: float  # the critical value used
    se: float  # the standard error of the difference of means

    @property
    def held(self) -> bool:
        return self.measured.mean >= self.lower

    def describe(self) -> str:
        return (f">= {self.lower:.4g} (one-sided pooled t test at a {self.rate:.2%} false-failure rate: "
                f"{self.baseline.n} recorded trials sd {self.baseline.sd:.3g}, "
                f"{self.measured.n} measured sd {self.measured.sd:.3g})")


@functools.lru_cache(maxsize=1024)
def _t_critical(rate: float, df: int) -> float:
    from scipy.stats import t as student_t  # scipy is already the statistics layer's dependency

    return float(student_t.ppf(1.0 - rate, df))


def band(baseline: Summary, measured: Summary, rate: float = DEFAULT_FALSE_FAILURE_RATE) -> Band:
    """The band ``measured`` is judged by against ``baseline`` at false-failure rate ``rate`` (0 < rate < 0.5).

    With two trials in all the pooled spread has no degree of freedom: the band is then the baseline's
    own mean less the floor (a check with so few trials cannot say more, and says so in the docs).
    """
    if not 0.0 < rate < 0.5:
        raise ValueError(f"false-failure rate {rate} must be within (0, 0.5)")
    n1, n2 = baseline.n, measured.n
    floor = SD_FLOOR_REL * abs(baseline.mean)
    df = n1 + n2 - 2
    if df < 1:
        return Band(baseline.mean - floor, baseline, measured, rate, 0.0, floor)
    pooled = math.sqrt(((n1 - 1) * baseline.sd ** 2 + (n2 - 1) * measured.sd ** 2) / df)
    pooled = max(pooled, floor)
    se = pooled * math.sqrt(1.0 / n1 + 1.0 / n2)
    t = _t_critical(rate, df)
    return Band(baseline.mean - t * se, baseline, measured, rate, t, se)
