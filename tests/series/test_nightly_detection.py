"""The grid benchmark's histories and scoring, and the sequential detector on the cases it must tell apart."""

from __future__ import annotations

import numpy as np

from harness.series import steps
from harness.series.steps import Rule, Tracker, detect
from tests.series.anchors import Replay, _edivisive_split, sglang_rule
from tests.series.grid import QUIET_KINDS, GridHistory, grid
from tests.series.scoring import DELAY_BOUND, score_history, summarise

RULE = Rule(0.02)


def _series(values, k: int = 1, noise: float = 0.01, seed: int = 0) -> list[tuple[float, ...]]:
    rng = np.random.default_rng(seed)
    return [tuple(float(v) * (1 + noise * rng.standard_normal(k))) for v in values]


def _history(kind: str, trials, change=None, end=None, effect=None) -> GridHistory:
    return GridHistory(kind, 0, 0.01, "gaussian", tuple(trials), effect, change, end)


def test_the_grid_is_seeded_and_two_seed_sets_share_no_history() -> None:
    one, again, other = list(grid(1, per_cell=1, quiet_per_noise=1)), list(grid(1, per_cell=1, quiet_per_noise=1)), \
        list(grid(2, per_cell=1, quiet_per_noise=1))
    assert [h.trials for h in one] == [h.trials for h in again]
    assert not {h.seed for h in one} & {h.seed for h in other}
    assert {h.kind for h in one} == {"step", "drift", "drift-stops", *QUIET_KINDS}
    steps = [h for h in one if h.kind == "step"]
    assert len(steps) == 5 * 5 * 2 and {len(t) for h in one for t in h.trials} <= {0, 1, 2, 3, 4, 5}
    assert any(not t for h in one if h.kind == "gaps" for t in h.trials)


class _Repeater:
    """Re-raises a drift every night with a new start point, as the old drift rule did."""

    def __init__(self) -> None:
        self.n = 0

    def push(self, value: float, trials) -> list[tuple[str, int]]:
        self.n += 1
        return [("drift", self.n - 1)] if self.n > 20 and self.n % 5 == 0 else []


def test_every_repeat_of_a_drift_is_charged_as_a_false_alarm() -> None:
    h = _history("drift", _series(np.linspace(100, 85, 60)), change=0, end=59, effect=-0.15)
    out = score_history(h, _Repeater)
    assert out.hit is not None and out.hit[1] == "drift" and out.repeats == len(out.alerts) - 1 >= 7


class _Late:
    """Names the step at night 30, one night past the delay bound."""

    def __init__(self) -> None:
        self.n = 0

    def push(self, value: float, trials) -> list[tuple[str, int]]:
        self.n += 1
        return [("step", 30)] if self.n - 1 == 30 + DELAY_BOUND + 1 else []


def test_a_step_found_after_the_delay_bound_is_a_miss_not_a_hit() -> None:
    values = [100.0] * 30 + [90.0] * 30
    out = score_history(_history("step", _series(values), change=30, effect=-0.1), _Late)
    assert len(out.alerts) == 1 and out.hit is None and out.late and out.false_alarms == 0


def test_a_burst_of_three_bad_nights_raises_nothing_and_a_step_is_confirmed_on_its_fourth_point() -> None:
    burst = [100.0] * 30 + [80.0] * 3 + [100.0] * 27
    assert not [f for f in detect([float(np.median(t)) for t in _series(burst)], RULE) if f.kind != "suspicious"]
    step = [100.0] * 30 + [90.0] * 10
    tracker, fired = Tracker(RULE), []
    for night, t in enumerate(_series(step, k=3)):
        fired += [(night, f) for f in tracker.push(float(np.median(t)), t)]
    assert fired == [(33, ("step", 30))]


def test_a_slow_drift_is_named_once_as_drift_never_as_a_step() -> None:
    values = 100 * (1 - 0.15 * np.arange(60) / 59)
    findings = detect([float(v) for v in values], RULE, _series(values, k=3, noise=0.01, seed=4))
    assert [f.kind for f in findings if f.kind != "suspicious"] == ["drift"]


def test_a_change_in_the_last_two_points_is_only_suspicious() -> None:
    values = [100.0] * 40 + [90.0] * 2
    trials = _series(values, k=3)
    findings = detect([float(np.median(t)) for t in trials], RULE, trials)
    assert [(f.kind, f.index) for f in findings] == [("suspicious", 40)]


def test_more_trials_per_night_find_the_same_step_no_later() -> None:
    values = [100.0] * 30 + [96.0] * 12

    def first(k: int) -> int:
        tracker = Tracker(RULE)
        for night, t in enumerate(_series(values, k=k, noise=0.02, seed=9)):
            if tracker.push(float(np.median(t)), t):
                return night
        return 99
    assert first(5) <= first(1)


def test_the_anchors_run_online_and_the_fast_e_divisive_matches_the_brute_force_one() -> None:
    y = np.r_[np.zeros(20), np.ones(15)] + 0.3 * np.random.default_rng(1).standard_normal(35)
    d = np.abs(y[:, None] - y[None, :])
    brute = max(range(3, 33), key=lambda t: (t * (35 - t) / 35) * (
        2 * d[:t, t:].mean() - d[:t, :t].sum() / (t * (t - 1)) - d[t:, t:].sum() / ((35 - t) * (34 - t))))
    assert _edivisive_split(y)[0] == brute  # type: ignore[index]
    h = _history("step", _series([100.0] * 30 + [80.0] * 30), change=30, effect=-0.2)
    summary = summarise([score_history(h, lambda: Replay(sglang_rule))])
    assert summary["recall_within_10_all_steps"] == 1.0


def _fired(values, noise: float, seed: int) -> list[tuple[int, tuple[str, int]]]:
    """(night, (kind, index)) of every change the tracker confirmed over ``values`` (3 trials a night)."""
    tracker, fired = Tracker(RULE), []
    for night, t in enumerate(_series(values, k=3, noise=noise, seed=seed)):
        fired += [(night, f) for f in tracker.push(float(np.median(t)), t)]
    return fired


def test_a_steep_slide_that_stops_is_one_drift_not_a_step() -> None:
    # -15% over 30 nights from night 10, then flat: 3x the noise of a point every night, so the slide is
    # plain within a few nights of it (the slide tests of the step rule see it before a step is confirmed).
    slide = 100 * (1 - 0.15 * np.clip((np.arange(60) - 10) / 30, 0, 1))
    for seed in range(4):
        assert [f for _, f in _fired(slide, 0.005, seed)] == [("drift", 0)], seed


def test_a_clean_step_is_a_step() -> None:
    step = np.r_[np.full(40, 100.0), np.full(20, 95.0)]
    for seed in range(4):
        assert _fired(step, 0.01, seed) == [(43, ("step", 40))], seed


def test_a_step_after_a_drift_that_stopped_is_still_found_and_the_drift_is_not_raised_again() -> None:
    # -10% over nights 0-30, flat, then a 5% step at night 50 either way. Before the drift's episode was
    # closed, every slide test of the step rule saw the old slide in the step's segment: never found.
    drift = 100 * (1 - 0.10 * np.clip(np.arange(70) / 30, 0, 1))
    for sign in (-1, 1):
        values = drift * np.where(np.arange(70) >= 50, 1 + sign * 0.05, 1.0)
        for seed in range(3):
            assert [f for _, f in _fired(values, 0.01, seed)] == [("drift", 0), ("step", 50)], (sign, seed)


def _ar1(nights: int, phi: float, sd: float, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    e = np.empty(nights)
    e[0] = rng.standard_normal()
    for i in range(1, nights):
        e[i] = phi * e[i - 1] + np.sqrt(1 - phi * phi) * rng.standard_normal()
    return list(100.0 * (1 + sd * e))


def test_noise_that_wanders_from_night_to_night_raises_far_fewer_alerts(monkeypatch) -> None:
    """A busy machine is busy for several nights: AR(1) noise (0.5, sd 3%) wanders, and its wanders were steps and
    drifts to a noise model that took the nights as independent. The residuals' lag-1 correlation widens the
    tests: 24 such quiet histories raise about half as many alerts as with the widening capped at 0 (not none:
    a wander of ten nights is, on those nights, a change)."""
    histories = [_ar1(60, 0.5, 0.03, seed) for seed in range(24)]

    def alerts() -> int:
        return sum(1 for v in histories for f in detect(v, RULE) if f.kind != "suspicious")

    widened = alerts()
    monkeypatch.setattr(steps, "AR_CAP", 0.0)
    plain = alerts()
    assert plain >= 12 and widened <= 0.6 * plain, (widened, plain)


def test_a_drift_that_begins_in_the_first_nights_is_raised_as_a_level_change_not_a_step() -> None:
    """Ten nights in, a slide that began on the sixth is confirmed: too few nights before it for any slide test,
    so it is raised as what the data can tell (a level change, renamed when the nights do), never as a step."""
    values = [100.0 * (1 - 0.006 * max(0, n - 5)) for n in range(50)]
    trials = _series(values, k=3, noise=0.01, seed=3)
    found = [f for f in detect([float(np.median(t)) for t in trials], RULE, trials) if f.kind != "suspicious"]
    assert found and all(f.first_name != "step" for f in found), found
