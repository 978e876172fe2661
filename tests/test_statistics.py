"""The statistics module on synthetic samples whose truth is known by construction."""

from __future__ import annotations

import itertools
import math
import statistics as pystats

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

from harness.measure.statistics import bootstrap_ci, mann_whitney, min_p_value, relative_delta, summarize


def _normal(mean: float, sd: float, n: int, seed: int) -> list[float]:
    return list(np.random.default_rng(seed).normal(mean, sd, n))


def test_summarize_agrees_with_the_standard_library():
    samples = [2.1, 2.4, 1.9, 2.8, 2.2, 2.5]
    s = summarize(samples)
    assert s.n == 6
    assert s.mean == pytest.approx(pystats.mean(samples))
    assert s.median == pytest.approx(pystats.median(samples))
    assert s.stdev == pytest.approx(pystats.stdev(samples))
    assert (s.min, s.max) == (1.9, 2.8)


def test_summarize_single_sample_has_zero_spread():
    s = summarize([3.0])
    assert (s.n, s.mean, s.median, s.stdev) == (1, 3.0, 3.0, 0.0)


@pytest.mark.parametrize("bad", [[], [1.0, math.nan], [math.inf]])
def test_bad_samples_are_rejected(bad):
    with pytest.raises(ValueError, match="need at least one sample|must be finite"):
        summarize(bad)
    with pytest.raises(ValueError, match="need at least one sample|must be finite"):
        bootstrap_ci([1.0, 2.0], bad)


def test_relative_delta_is_after_over_before_minus_one():
    assert relative_delta([100, 100], [50, 50]) == pytest.approx(-0.5)
    assert relative_delta([2, 4], [3, 3], stat="median") == pytest.approx(0.0)
    assert math.isnan(relative_delta([0, 0], [1, 1]))


def test_bootstrap_ci_covers_a_known_halving():
    before = _normal(1000, 30, 8, seed=1)
    after = _normal(500, 15, 8, seed=2)
    low, high = bootstrap_ci(before, after)
    assert low <= relative_delta(before, after) <= high
    assert -0.6 < low < high < -0.4


def test_bootstrap_ci_of_one_distribution_includes_zero():
    low, high = bootstrap_ci(_normal(2.5, 0.1, 10, seed=3), _normal(2.5, 0.1, 10, seed=4))
    assert low < 0 < high


def test_bootstrap_ci_is_reproducible_and_seeded():
    before, after = _normal(10, 2, 6, seed=5), _normal(11, 2, 6, seed=6)
    assert bootstrap_ci(before, after, seed=7) == bootstrap_ci(before, after, seed=7)
    assert bootstrap_ci(before, after, seed=7) != bootstrap_ci(before, after, seed=8)


def test_bootstrap_ci_median_and_confidence_width():
    before, after = _normal(10, 2, 12, seed=9), _normal(12, 2, 12, seed=10)
    narrow = bootstrap_ci(before, after, confidence=0.5)
    wide = bootstrap_ci(before, after, confidence=0.99)
    assert wide[0] <= narrow[0] <= narrow[1] <= wide[1]
    low, high = bootstrap_ci(before, after, stat="median")
    assert low < high
    with pytest.raises(ValueError, match="stat must be 'mean' or 'median'"):
        bootstrap_ci(before, after, stat="mode")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"confidence must be in \(0, 1\)"):
        bootstrap_ci(before, after, confidence=1.0)


def test_bootstrap_ci_without_a_usable_baseline_is_nan():
    low, high = bootstrap_ci([0.0, 0.0, 0.0], [1.0, 2.0, 3.0])
    assert math.isnan(low) and math.isnan(high)


def test_mann_whitney_sees_a_clear_shift():
    assert mann_whitney(_normal(1000, 30, 8, seed=11), _normal(500, 15, 8, seed=12)) < 0.01


def test_mann_whitney_sees_nothing_in_one_distribution():
    assert mann_whitney(_normal(5, 1, 10, seed=13), _normal(5, 1, 10, seed=14)) > 0.05


def test_mann_whitney_is_symmetric():
    a, b = _normal(5, 1, 7, seed=15), _normal(6, 1, 6, seed=16)
    assert mann_whitney(a, b) == pytest.approx(mann_whitney(b, a))


def test_mann_whitney_constant_samples():
    assert mann_whitney([2.0, 2.0, 2.0], [2.0, 2.0, 2.0]) == 1.0


def test_mann_whitney_ties_use_the_exact_permutation_distribution():
    # Deterministic builds repeat values; complete separation of 5 vs 5 is p = 2 / C(10, 5).
    p = mann_whitney([2.0] * 5, [1.5] * 4 + [1.25])
    assert p == pytest.approx(2 / math.comb(10, 5))


@pytest.mark.parametrize(("n1", "n2"), [(1, 1), (2, 3), (3, 3), (4, 4), (5, 5)])
def test_min_p_value_matches_complete_separation(n1, n2):
    before = [float(i) for i in range(n1)]
    after = [float(100 + i) for i in range(n2)]
    assert min_p_value(n1, n2) == pytest.approx(min(1.0, mann_whitney(before, after)))
    # No arrangement of distinct values gets lower.
    values = list(range(n1 + n2))
    lowest = min(
        mann_whitney([float(v) for v in left], [float(v) for v in values if v not in left])
        for left in itertools.combinations(values, n1)
    )
    assert lowest == pytest.approx(min_p_value(n1, n2))


samples = hst.lists(hst.floats(min_value=0.1, max_value=1e4), min_size=1, max_size=12)


@settings(max_examples=40, deadline=None)
@given(samples, samples)
def test_interval_and_p_value_are_well_formed(before, after):
    low, high = bootstrap_ci(before, after, n_resamples=200)
    assert low <= high
    assert 0.0 <= mann_whitney(before, after) <= 1.0
