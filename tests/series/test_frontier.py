"""The reference scan the held-out goal is read against (``tests.series.frontier``): its statistic is the textbook
one, its oracle variant is calibrated under AR(1) noise where the plain t is not, and its threshold meets the bound
it was chosen for."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from tests.series.frontier import Scan, score_scan, threshold_for
from tests.series.grid import GridHistory


def _ar1(rng: np.random.Generator, n: int, rho: float) -> np.ndarray:
    e = rng.standard_normal(n) * np.sqrt(1 - rho * rho)
    out = np.empty(n)
    out[0] = rng.standard_normal()
    for i in range(1, n):
        out[i] = rho * out[i - 1] + e[i]
    return out


def test_the_plain_statistic_is_the_pooled_two_sample_t() -> None:
    rng = np.random.default_rng(3)
    y = rng.standard_normal(30) + np.r_[np.zeros(22), np.full(8, 0.7)]
    got = Scan(5.0, 0.0)._t(y, 22)
    assert got == pytest.approx(float(stats.ttest_ind(y[22:], y[:22]).statistic), rel=1e-9)


def test_told_the_autocorrelation_its_t_is_calibrated_where_the_plain_t_is_not() -> None:
    rng = np.random.default_rng(5)
    told, plain = Scan(5.0, 0.0, rho=0.6), Scan(5.0, 0.0)
    series = [_ar1(rng, 34, 0.6) for _ in range(600)]
    t_told = np.array([told._t(y, 28) for y in series])
    t_plain = np.array([plain._t(y, 28) for y in series])
    # Under no change a calibrated t has sd about 1 (a t of 32 degrees of freedom: 1.03); the plain t of AR(1) at
    # 0.6, 28 | 6 points, about 1.5.
    assert 0.9 < float(np.std(t_told)) < 1.15
    assert float(np.std(t_plain)) > 1.3


def test_a_clear_step_is_raised_on_the_first_night_it_may_be_at_its_first_point() -> None:
    rng = np.random.default_rng(1)
    y = 100 + rng.standard_normal(30) + np.r_[np.zeros(20), np.full(10, 10.0)]
    scan, raised = Scan(5.0, 0.02), []
    for night, v in enumerate(y):
        raised += [(night, kind, i) for kind, i in scan.push(float(v))]
    assert raised == [(23, "step", 20)]


def _stationary(seed: int, count: int) -> list[GridHistory]:
    rng = np.random.default_rng(seed)
    return [GridHistory("stationary", seed * 100 + i, 0.05, "student-t",
                        tuple((float(v),) for v in 100 * (1 + 0.05 * rng.standard_t(3, 40) / np.sqrt(3))))
            for i in range(count)]


def test_the_threshold_meets_its_bound_and_one_step_lower_does_not() -> None:
    sets = [_stationary(seed, 8) for seed in (1, 2)]

    def worst(th: float) -> int:
        return max(sum(len(o.alerts) for o in score_scan(s, th, 0.02)) for s in sets)

    h = threshold_for(sets, 0.02, per_set=1, low=2.0, high=12.0)
    assert worst(h) <= 1
    assert worst(round(h - 0.05, 2)) > 1


def test_no_threshold_in_range_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="no threshold up to 2.5"):
        threshold_for([_stationary(3, 8)], 0.0, per_set=0, low=2.0, high=2.5)
