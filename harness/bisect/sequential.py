"""A sequential test that tells which endpoint a step's metric samples look like.

Wald's sequential probability ratio test between two normal models, one per endpoint of the
bisection: ``N(mean of the good endpoint's samples, sd)`` and ``N(mean of the bad endpoint's
samples, sd)``, with ``sd`` the pooled standard deviation of both endpoints' samples. After each
trial the log-likelihood ratio of the step's samples is compared with Wald's bounds
``log((1 - beta) / alpha)`` and ``log(beta / (1 - alpha))``; between them, one more trial. The
caller bounds the number of trials, so an undecided step ends as a skip, never as a guess.

Why the floor on ``sd``: two or three endpoint trials can agree by luck to a few tenths of a
percent, and a test that believed that noise level would decide on one sample that merely sits
closer to one mean. The floor (a quarter of the distance between the means) keeps one sample at
an endpoint's mean decisive (log-ratio 8 > 4.6 at alpha 0.01) while a sample half-way stays undecided.

Pure functions, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

__all__ = ["SequentialResult", "Side", "endpoint_difference", "pooled_sd", "sequential_test"]

_SD_FLOOR_OF_DISTANCE = 0.25


class Side(str, Enum):
    GOOD = "good"
    BAD = "bad"
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class SequentialResult:
    side: Side
    log_ratio: float  # log P(samples | bad) - log P(samples | good)
    samples: int
    upper: float
    lower: float


def without_stalls(samples: Sequence[float]) -> tuple[float, ...]:
    """The samples less gross outliers (beyond 5 scaled MADs of the median, the scale at least 1% of it).

    A trial during which the machine stalled (another job, a page-in) is not a sample of the code; one such
    value among three to five would otherwise decide a step or hide an endpoint difference. Fewer than
    three samples are returned as they are: there is no median to judge them by."""
    xs = sorted(samples)
    if len(xs) < 3:
        return tuple(samples)
    mid = len(xs) // 2
    median = xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2
    deviations = sorted(abs(x - median) for x in xs)
    mad = deviations[mid] if len(xs) % 2 else (deviations[mid - 1] + deviations[mid]) / 2
    scale = max(1.4826 * mad, 0.01 * abs(median))
    return tuple(x for x in samples if abs(x - median) <= 5 * scale)


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def pooled_sd(good: Sequence[float], bad: Sequence[float]) -> float:
    """The pooled sample standard deviation of both endpoints (0 with fewer than 3 samples in all)."""
    dof = len(good) + len(bad) - 2
    if dof <= 0:
        return 0.0
    ss = sum((x - _mean(good)) ** 2 for x in good) + sum((x - _mean(bad)) ** 2 for x in bad)
    return math.sqrt(ss / dof)


def sequential_test(
    samples: Sequence[float], good: Sequence[float], bad: Sequence[float], *, alpha: float = 0.01, beta: float = 0.01
) -> SequentialResult:
    """Which endpoint ``samples`` come from: GOOD, BAD, or UNDECIDED (take another sample)."""
    if not good or not bad:
        raise ValueError("the sequential test needs samples of both endpoints")
    mu_good, mu_bad = _mean(good), _mean(bad)
    distance = abs(mu_bad - mu_good)
    upper, lower = math.log((1 - beta) / alpha), math.log(beta / (1 - alpha))
    if distance == 0:
        return SequentialResult(Side.UNDECIDED, 0.0, len(samples), upper, lower)
    sd = max(pooled_sd(good, bad), _SD_FLOOR_OF_DISTANCE * distance)
    llr = sum(((x - mu_good) ** 2 - (x - mu_bad) ** 2) / (2 * sd * sd) for x in samples)
    side = Side.BAD if llr >= upper else Side.GOOD if llr <= lower else Side.UNDECIDED
    return SequentialResult(side, llr, len(samples), upper, lower)


def endpoint_difference(good: Sequence[float], bad: Sequence[float]) -> tuple[float, float]:
    """(relative change from good to bad, two-sided Welch t-test p-value) of the endpoints' samples."""
    from scipy import stats

    mu_good = _mean(good)
    rel = (_mean(bad) - mu_good) / abs(mu_good) if mu_good else math.inf
    if len(good) < 2 or len(bad) < 2:
        return rel, 1.0
    if pooled_sd(good, bad) == 0:
        return rel, 0.0 if _mean(bad) != mu_good else 1.0
    p = float(stats.ttest_ind(good, bad, equal_var=False).pvalue)
    return rel, p if math.isfinite(p) else 1.0
