"""Online scoring of detectors on the grid histories (``tests.history.grid``), counting what a person gets.

Each night the detector sees the series so far (the nights with numbers; a gap night adds nothing)
and says which changes it reports now, as (kind, series index). A report becomes an *alert* unless
the same kind was already raised within ``TOLERANCE`` points (the store's rule: a change point moved
by a night or two is the same alert), so a rule that re-raises a change with a new start point is
charged for every repeat, as a person would be.

Per history, with its truth:

- a step at night ``c``: the first alert naming a point within ``TOLERANCE`` nights of ``c`` and
  raised at most ``DELAY_BOUND`` nights after it is the hit (delay = night - c); found later it is
  a miss (counted as *late*, not as a false alarm); any further alert naming it is a repeat;
- a drift from night ``s`` to ``end``: the first alert raised in ``[s, end + DELAY_BOUND]`` is the
  hit (``named_as_step`` when it was a step alert); every other alert in that span is a repeat; a
  first alert after that span naming a night of the drift is late (a miss, not a false alarm);
- every other alert is a false alarm. Repeats are false alarms too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from tests.history.grid import GridHistory

__all__ = ["DELAY_BOUND", "Online", "Outcome", "score_history", "summarise"]

TOLERANCE = 2
DELAY_BOUND = 10


class Online(Protocol):
    """A detector fed one point at a time: ``push`` returns the changes it reports tonight."""

    def push(self, value: float, trials: Sequence[float]) -> list[tuple[str, int]]: ...


@dataclass
class Outcome:
    """What one detector did on one history."""

    history: GridHistory
    alerts: list[tuple[int, str, int]] = field(default_factory=list)  # (night raised, kind, night named)
    hit: tuple[int, str, int] | None = None  # (delay in nights, kind, points seen after the change)
    late: bool = False
    false_alarms: int = 0
    repeats: int = 0


def _alerts(history: GridHistory, make: Callable[[], Online]) -> list[tuple[int, str, int]]:
    det = make()
    nights: list[int] = []  # series index -> night
    raised: list[tuple[int, str, int]] = []
    for night, trials in enumerate(history.trials):
        if not trials:
            continue
        nights.append(night)
        for kind, idx in det.push(float(np.median(trials)), trials):
            named = nights[idx]
            if not any(k == kind and abs(named - n) <= TOLERANCE for _, k, n in raised):
                raised.append((night, kind, named))
    return raised


def score_history(history: GridHistory, make: Callable[[], Online]) -> Outcome:
    out = Outcome(history, _alerts(history, make))
    c = history.change
    for night, kind, named in out.alerts:
        if history.kind == "step" and c is not None and abs(named - c) <= TOLERANCE:
            if out.hit is None and not out.late and night - c <= DELAY_BOUND:
                seen = sum(1 for t in history.trials[c:night + 1] if t)
                out.hit = (night - c, kind, seen)
            elif out.hit is None and not out.late:
                out.late = True
            else:
                out.repeats += 1
        elif history.change_end is not None and c is not None and c <= night <= history.change_end + DELAY_BOUND:
            if out.hit is None:
                out.hit = (night - c, kind, 0)
            else:
                out.repeats += 1
        elif history.change_end is not None and c is not None and night > history.change_end + DELAY_BOUND \
                and named <= history.change_end and out.hit is None and not out.late:
            out.late = True  # the drift, named too late: a miss, not a false alarm
        else:
            out.false_alarms += 1
    return out


def _recall(outs: Iterable[Outcome], within: int) -> tuple[int, int]:
    """(found within ``within`` nights, steps observable that long) over step histories."""
    found = total = 0
    for o in outs:
        c = o.history.change
        if o.history.kind != "step" or c is None or c + within > o.history.nights - 1:
            continue
        total += 1
        found += o.hit is not None and o.hit[0] <= within
    return found, total


def _ratio(found_total: tuple[int, int]) -> float | None:
    found, total = found_total
    return round(found / total, 3) if total else None


def _cells(steps: list[Outcome]) -> dict[str, dict[str, float | int | None]]:
    cells: dict[str, list[Outcome]] = {}
    for o in steps:
        cells.setdefault(f"{abs(o.history.effect or 0):.0%} / {o.history.noise:.0%}", []).append(o)
    return {key: {"n": len(v), "within_5": _ratio(_recall(v, 5)), "within_10": _ratio(_recall(v, 10))}
            for key, v in cells.items()}


def summarise(outs: Sequence[Outcome]) -> dict[str, object]:
    """The figures of one detector over one seed set."""
    steps = [o for o in outs if o.history.kind == "step"]
    drifts = [o for o in outs if o.history.change_end is not None]
    ratio = {id(o): abs(o.history.effect or 0) / o.history.noise for o in steps}
    strong = [o for o in steps if ratio[id(o)] >= 2.5]
    mid = [o for o in steps if 1.6 <= ratio[id(o)] < 2.5]
    at17 = [o for o in steps if 1.6 <= ratio[id(o)] < 1.8]
    series_nights = sum(o.history.nights for o in outs)
    false = sum(o.false_alarms + o.repeats for o in outs)
    by_kind: dict[str, int] = {}
    for o in outs:
        by_kind[o.history.kind] = by_kind.get(o.history.kind, 0) + o.false_alarms + o.repeats
    delays = [o.hit[0] for o in steps if o.hit is not None]
    return {
        "false_alarms_per_1000_series_nights": round(1000 * false / series_nights, 2),
        "false_alarms": false, "series_nights": series_nights,
        "false_alarms_by_kind": by_kind,
        "recall_within_5_steps_ge_2.5x_noise": _ratio(_recall(strong, 5)),
        "recall_within_10_steps_1.6x_to_2.5x_noise": _ratio(_recall(mid, 10)),
        "recall_within_10_steps_1.67x_noise": _ratio(_recall(at17, 10)),
        "recall_within_10_all_steps": _ratio(_recall(steps, 10)),
        "median_delay_nights": float(np.median(delays)) if delays else None,
        "late_step_alerts": sum(o.late for o in steps),
        "late_drift_alerts": sum(o.late for o in drifts),
        "alerts_with_at_most_2_points_after": sum(1 for o in steps if o.hit is not None and o.hit[2] <= 2),
        "drift_found": f"{sum(o.hit is not None for o in drifts)} of {len(drifts)}",
        "drift_named_as_step": sum(1 for o in drifts if o.hit is not None and o.hit[1] == "step"),
        "drift_repeats": sum(o.repeats for o in drifts),
        "recall_by_cell_effect_noise": _cells(steps),
    }
