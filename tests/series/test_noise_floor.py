"""A series that repeats itself to the digit (the reference server's acceptance length, night after night) has no
noise to weigh by: its evidence must still read in noise units a person can use, not billions."""

from __future__ import annotations

import re

from harness.series.steps import Rule, Tracker


def _findings_of(values: list[float]) -> Tracker:
    tracker = Tracker(Rule(0.02))
    for v in values:
        tracker.push(v, [v, v, v])
    return tracker


def test_a_steady_series_evidence_stays_readable() -> None:
    # 12 nights at 3.2 tokens/step, then 2.9 (one night 2.88): the shape that printed "slide going 1050496523.7".
    tracker = _findings_of([3.2] * 12 + [2.9] * 4 + [2.88] + [2.9] * 8)
    (found,) = tracker.findings
    assert found.index == 12 and found.regression
    figures = [float(x) for _, _, evidence in found.names for x in re.findall(r"\d+\.\d", evidence)]
    assert figures, found.names
    # A 9% drop at a noise floor of a tenth of the 2% minimum effect: tens of noise units, squared thousands.
    assert max(figures) < 1e5, found.names
    assert abs(found.z) < 1e3, found.z


def test_the_floor_keeps_a_change_of_the_minimum_effect() -> None:
    # Steady to the digit, then exactly the minimum effect (2%) for good: still confirmed.
    tracker = _findings_of([100.0] * 20 + [98.0] * 6)
    assert [f.index for f in tracker.findings] == [20], tracker.findings
