"""The screen (every series' nights at once) against the sequential tracker run night by night: on varied
histories, ``screen.replay`` leaves the tracker in the state a full replay leaves, to the bit, with the same
findings and suspicious tail; and a screen that misses a deciding night is caught by this comparison."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from harness.series import detections, screen
from harness.series.steps import LARGE_CHANGE, Rule, Tracker, large_floor
from tests.series import synthetic


def _full(rule: Rule, values: Sequence[float], trials: Sequence[Sequence[float]]) -> Tracker:
    tracker = Tracker(rule)
    for v, t in zip(values, trials):
        tracker.push(v, t)
    return tracker


def _histories() -> list[list[float]]:
    out = []
    for kind in ("step", "outlier", "drift", "late-step", "flat"):
        for seed in range(3):
            for n in (20, 50, 150):
                out.append(list(synthetic.generate(kind, seed, n=n, noise=(0.005, 0.02, 0.05)[seed % 3]).values))
    rng = np.random.default_rng(7)
    out += [list(100 * (1 + 0.03 * rng.standard_normal(365))) for _ in range(3)]  # a year of noise
    out.append(list(np.full(60, 42.0)))  # no noise at all: every split ties
    out.append([0.0] * 30 + [1e-9] * 30)  # a level of zero
    out.append(list(1e6 * (1 + 1e-5 * rng.standard_normal(120))))  # large values, tiny noise
    out.append(list(np.r_[np.full(50, 100.0), np.full(50, 90.0)] * (1 + 0.01 * rng.standard_normal(100))))
    out.append([100.0, 101.0, 99.0])  # shorter than any split
    # Large changes: on a young series (five nights, then -80%), on an older one, and a two-night burst.
    out.append(list(np.r_[np.full(5, 300.0), np.full(20, 55.0)] * (1 + 0.01 * rng.standard_normal(25))))
    out.append(list(np.r_[np.full(40, 300.0), np.full(20, 150.0)] * (1 + 0.02 * rng.standard_normal(60))))
    out.append(list(np.r_[np.full(30, 100.0), [60.0, 62.0], np.full(30, 100.0)] * (1 + 0.01 * rng.standard_normal(62))))
    return out


@pytest.mark.parametrize("rule", [Rule(0.05), Rule(0.02, higher_is_better=False)])
def test_replay_of_the_hot_nights_is_the_full_replay(rule: Rule) -> None:
    series = _histories()
    hot = screen.hot_nights([np.asarray(v) for v in series], [large_floor(rule)] * len(series))
    pushed_less = 0
    for values, h in zip(series, hot):
        trials = [(v,) for v in values]
        full, fast = _full(rule, values, trials), screen.replay(rule, values, trials, h)
        assert detections._state(fast) == detections._state(full)
        assert fast.findings == full.findings and fast.suspicious() == full.suspicious()
        pushed_less += len(h) < len(values) // 2
    assert pushed_less > len(series) // 2  # the screen does skip most nights (else it would prove nothing)
    assert any(_full(rule, v, [(x,) for x in v]).findings for v in series)  # and there are findings to keep
    assert any(f.kind == LARGE_CHANGE for v in series for f in _full(rule, v, [(x,) for x in v]).findings)


def test_a_screen_that_misses_the_deciding_night_is_caught() -> None:
    """The comparison above can fail: a step series whose hot nights are dropped loses its step."""
    values = list(synthetic.generate("step", 1, n=90, noise=0.005).values)
    trials = [(v,) for v in values]
    rule = Rule(0.05)
    full = _full(rule, values, trials)
    assert full.findings
    assert screen.replay(rule, values, trials, np.zeros(0, int)).findings != full.findings


def test_only_single_trial_finite_series_are_screened() -> None:
    assert screen.screenable([(1.0,), ()], [1.0, 2.0])
    assert not screen.screenable([(1.0, 1.1)], [1.05])  # trials: the noise model has a within-night part
    assert not screen.screenable([(1.0,), (1.0,)], [1.0, float("nan")])
