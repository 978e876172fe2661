"""Change detection on seeded synthetic histories (tests.series.synthetic), also kept as fixtures."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from harness.alerts.alert import case_alerts
from harness.records.outcome import Outcome
from harness.series.points import CasePoints, Point
from harness.series.steps import Rule, detect
from tests.series.scoring import TOLERANCE
from tests.series.synthetic import KINDS, generate

THROUGHPUT = Rule(0.05)  # the strictest minimum effect the issue names: 5% throughput
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "histories"


def _steps(values, rule=THROUGHPUT):
    """The steps found, whatever their name yet: a step the start of a slide fits as well is a level change
    until the nights after it tell (``steps.Tracker``)."""
    return [f for f in detect(values, rule) if f.kind in ("step", "level-change")]


def test_the_fixture_set_is_what_the_seeded_generator_makes() -> None:
    for kind in KINDS:
        kept = json.loads((FIXTURES / f"{kind}.json").read_text())
        fresh = generate(kind, 0)
        assert kept["change"] == fresh.change and kept["outcomes"] == list(fresh.outcomes)
        for a, b in zip(kept["values"], fresh.values, strict=False):
            assert (a is None and math.isnan(b)) or a == pytest.approx(b, abs=1e-5)


def test_an_8pct_step_under_3pct_noise_is_found_within_2_points_in_95_of_100_seeds() -> None:
    found = 0
    for seed in range(100):
        h = generate("step", seed)
        hits = [f for f in _steps(h.values) if f.regression and abs(f.index - (h.change or 0)) <= TOLERANCE]
        found += bool(hits)
    assert found >= 95, found


def test_one_outlier_raises_no_alert_in_99_of_100_seeds() -> None:
    quiet = 0
    for seed in range(100):
        h = generate("outlier", seed)
        where = max(range(len(h.values)), key=lambda i: abs(h.values[i] - 100))
        # Every night on which the outlier is among the newest points, and the full history.
        nights = [*range(where + 1, min(len(h.values), where + 5) + 1), len(h.values)]
        quiet += not any(_steps(h.values[:n]) for n in nights)
    assert quiet >= 99, quiet


def test_a_15pct_drift_over_60_builds_is_drift_not_a_step() -> None:
    results = [detect(generate("drift", seed).values, THROUGHPUT) for seed in range(30)]
    assert sum(any(f.kind == "drift" and f.regression for f in r) for r in results) >= 27
    assert sum(any(f.kind == "step" for f in r) for r in results) <= 2


def test_a_step_in_the_last_two_points_is_suspicious_only() -> None:
    suspicious = 0
    for seed in range(30):
        findings = detect(generate("late-step", seed).values, Rule(0.02))
        assert not [f for f in findings if f.kind in ("step", "level-change") and f.index >= 55]
        suspicious += any(f.kind == "suspicious" and f.index >= 58 for f in findings)
    assert suspicious >= 20, suspicious


def _points(outcomes, signature="frozen-kv-mtp-stale-out-cache-loc") -> CasePoints:
    pts = tuple(Point(batch_id=f"b{i}", batch_label=f"night-{i}", started_at=f"2026-01-{i + 1:02d}",
                      build_key=f"k{i}", build_spec="src:sglang", build_version=None, build_commit=f"c{i:03d}",
                      outcome=Outcome(o), signatures=(signature,) if o == "crash" else (),
                      metrics={} if o == "crash" else {"accept_length": (1.8,)}, artifacts=())
                for i, o in enumerate(outcomes))
    return CasePoints("sc", "scenarios/sc.yaml", "tokens=276", "cpu:x", pts)


def test_a_crash_that_appears_alerts_at_the_first_crash_with_the_bisect_command() -> None:
    h = generate("crash", 3)
    alerts = case_alerts(_points(h.outcomes))
    (alert,) = [a for a in alerts if a.kind == "new-signature"]
    assert alert.first_bad.batch_label == f"night-{h.change}"
    assert alert.last_good is not None and alert.last_good.batch_label == f"night-{(h.change or 0) - 1}"
    # The build is src:sglang: the checkout it names is where to bisect.
    assert alert.bisect == (f"sglang-repro bisect scenarios/sc.yaml --case tokens=276 --repo sglang "
                            f"--good c{(h.change or 0) - 1:03d} --bad c{h.change:03d} "
                            "--signature frozen-kv-mtp-stale-out-cache-loc")
    # The same history later: the fingerprint is the same, so a store fires it once.
    later = case_alerts(_points([*h.outcomes, "crash"]))
    assert alert.fingerprint in {a.fingerprint for a in later}


def test_pass_to_fail_is_an_event() -> None:
    alerts = case_alerts(_points(["pass"] * 5 + ["fail"]))
    assert [a.kind for a in alerts] == ["pass-to-fail"]
