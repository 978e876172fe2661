"""After a finding the screen starts again from the tracker's segment (``screen.replay``): on histories whose
changes come early and are followed by long quiet stretches, more changes, slides that stop, or a level change
still undecided, the tracker ends in the state a full night-by-night replay leaves, to the bit, and the nights
after a finding are no longer all pushed."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from harness.series import detections, screen, steps
from harness.series.steps import Rule, Tracker, large_floor


def _full(rule: Rule, values: Sequence[float]) -> Tracker:
    tracker = Tracker(rule)
    for v in values:
        tracker.push(v, (v,))
    return tracker


def _histories() -> list[np.ndarray]:
    rng = np.random.default_rng(44)
    out = []
    for seed in range(4):
        noise = (0.01, 0.02, 0.03, 0.05)[seed]
        e = 1 + noise * rng.standard_normal(365)
        out.append(np.r_[np.full(20, 100.0), np.full(345, 85.0)] * e)  # a step early, then a year of noise
        out.append(np.r_[np.full(30, 100.0), np.full(100, 90.0), np.full(235, 100.0)] * e)  # down, then back
        out.append(np.r_[np.full(40, 100.0), np.linspace(100, 80, 40), np.full(285, 80.0)] * e)  # a slide that stops
        out.append(np.r_[np.full(40, 100.0), np.linspace(100, 80, 40), np.full(100, 80.0), np.full(185, 70.0)] * e)
        out.append(np.r_[np.full(10, 300.0), np.full(355, 60.0)] * e)  # a large change on a young series
        out.append(np.r_[np.full(50, 100.0), np.linspace(100, 90, 10), np.linspace(90, 80, 20), np.full(285, 80.0)] * e)
    return out


@pytest.mark.parametrize("rule", [Rule(0.05), Rule(0.02, higher_is_better=False)])
def test_the_replay_after_a_finding_is_the_full_replay(rule: Rule, monkeypatch: pytest.MonkeyPatch) -> None:
    series = _histories()
    hot = screen.hot_nights(series, [large_floor(rule)] * len(series))
    count = [0]
    real = steps.Tracker.push

    def counted(self: Tracker, value: float, trials: Sequence[float] = ()) -> list[tuple[str, int]]:
        count[0] += 1
        return real(self, value, trials)

    with_findings = 0
    for values, h in zip(series, hot):
        full = _full(rule, list(values))
        monkeypatch.setattr(steps.Tracker, "push", counted)
        count[0] = 0
        fast = screen.replay(rule, list(values), [(v,) for v in values], h)
        monkeypatch.setattr(steps.Tracker, "push", real)
        assert detections._state(fast) == detections._state(full)
        assert fast.findings == full.findings and fast.suspicious() == full.suspicious()
        if full.findings:
            with_findings += 1
            first = full.findings[0].index
            assert count[0] < (len(values) - first) / 2  # the nights after the finding were screened, not all pushed
    assert with_findings >= len(series) // 2  # there were findings to replay after
