"""Scoring detectors on synthetic histories, online: each night sees only the points so far.

An alert is (the night it fired, the point it names). Alerts naming a point within
``TOLERANCE`` of one already raised by the same detector are the same alert (what a fingerprint
does in the store). A true positive names a point within ``TOLERANCE`` of the history's change;
its delay is the night it fired minus the change's index (0: on the first bad build itself).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from harness.history.steps import Rule, detect
from harness.history.synthetic import History

__all__ = ["Alert", "Score", "TOLERANCE", "ours", "online_alerts", "score"]

TOLERANCE = 2
MIN_HISTORY = 10

Detector = Callable[[Sequence[float]], list[int]]


@dataclass(frozen=True)
class Alert:
    night: int
    point: int


@dataclass(frozen=True)
class Score:
    detector: str
    alerts: int
    true_positives: int
    steps: int
    found: int
    delays: tuple[int, ...]

    @property
    def precision(self) -> float:
        return self.true_positives / self.alerts if self.alerts else float("nan")  # no alert: undefined

    @property
    def recall(self) -> float:
        return self.found / self.steps if self.steps else 1.0

    @property
    def mean_delay(self) -> float:
        return float(np.mean(self.delays)) if self.delays else float("nan")


def ours(rule: Rule) -> Detector:
    """This project's detector as an online rule: the confirmed steps (not drift, not suspicious)."""
    def run(values: Sequence[float]) -> list[int]:
        return [f.index for f in detect(values, rule) if f.kind == "step"]
    return run


def online_alerts(detector: Detector, values: Sequence[float], *, start: int = MIN_HISTORY) -> list[Alert]:
    raised: list[Alert] = []
    for night in range(start, len(values)):
        for point in detector(values[:night + 1]):
            if not any(abs(point - a.point) <= TOLERANCE for a in raised):
                raised.append(Alert(night, point))
    return raised


def score(name: str, detector: Detector, histories: Sequence[History]) -> Score:
    """Precision over every alert raised; recall and delay over histories whose change is a step."""
    alerts = tp = steps = found = 0
    delays: list[int] = []
    for history in histories:
        raised = online_alerts(detector, history.values)
        alerts += len(raised)
        is_step = history.kind in ("step", "late-step") and history.change is not None
        hits = [a for a in raised if is_step and history.change is not None
                and abs(a.point - history.change) <= TOLERANCE]
        tp += len(hits)
        if is_step:
            steps += 1
            if hits:
                found += 1
                delays.append(hits[0].night - (history.change or 0))
    return Score(name, alerts, tp, steps, found, tuple(delays))
