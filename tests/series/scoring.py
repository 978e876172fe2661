"""Online scoring of detectors on the grid histories (``tests.series.grid``), counting what a person gets.

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

A report ``RENAMED + name`` (``steps.RENAMED``) renames the alert it names in place (a level change
named ``step`` or ``drift`` once the nights tell): not a new alert, but a message a person gets, so
a rename of a false alarm or of a repeat is one more false alarm. A drift history is right when its
hit is finally named ``drift`` with no repeat, half right while it is still a ``level-change``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from harness.series.steps import RENAMED
from tests.series.grid import GridHistory

__all__ = ["DELAY_BOUND", "Online", "Outcome", "is_step", "score_history", "summarise"]

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
    names: list[str] = field(default_factory=list)  # per alert: its name at the end (renames applied)
    renames: list[int] = field(default_factory=list)  # per alert: how often it was renamed
    hit_name: str | None = None  # the hit's name at the end


def _alerts(history: GridHistory, make: Callable[[], Online]) -> tuple[list[tuple[int, str, int]], list[str], list[int]]:
    """The alerts raised (night, kind, night named), each one's final name, and its renames."""
    det = make()
    nights: list[int] = []  # series index -> night
    raised: list[tuple[int, str, int]] = []
    names: list[str] = []
    renames: list[int] = []
    for night, trials in enumerate(history.trials):
        if not trials:
            continue
        nights.append(night)
        for kind, idx in det.push(float(np.median(trials)), trials):
            named = nights[idx]
            if kind.startswith(RENAMED):
                j = next((j for j, (_, _, n) in enumerate(raised) if n == named), None)
                if j is not None:
                    names[j] = kind[len(RENAMED):]
                    renames[j] += 1
                continue
            if not any(k == kind and abs(named - n) <= TOLERANCE for _, k, n in raised):
                raised.append((night, kind, named))
                names.append(kind)
                renames.append(0)
    return raised, names, renames


def is_step(history: GridHistory) -> bool:
    """A history whose truth is one step: the grid's ``step``, and the other sets' kinds of step (``gap-step``, ...)."""
    return history.kind == "step" or history.kind.endswith("-step")


def score_history(history: GridHistory, make: Callable[[], Online]) -> Outcome:
    alerts, names, renames = _alerts(history, make)
    out = Outcome(history, alerts, names=names, renames=renames)
    c = history.change
    for j, (night, kind, named) in enumerate(out.alerts):
        hit_before, repeats_before, false_before = out.hit, out.repeats, out.false_alarms
        if is_step(history) and c is not None and abs(named - c) <= TOLERANCE:
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
        if out.hit is not None and hit_before is None:
            out.hit_name = names[j]
        out.repeats += renames[j] if out.repeats > repeats_before else 0
        out.false_alarms += renames[j] if out.false_alarms > false_before else 0
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


def _hit_night(o: Outcome) -> int | None:
    c = o.history.change
    return None if o.hit is None or c is None else c + o.hit[0]


def _drift_score(drifts: Sequence[Outcome]) -> float | None:
    """Per drift history found: 1 when finally named drift and never repeated; 0.5 when still a level change."""
    found = [o for o in drifts if o.hit is not None]
    if not found:
        return None
    score = sum(1.0 if o.hit_name == "drift" and o.repeats == 0 else 0.5 if o.hit_name == "level-change"
                and o.repeats == 0 else 0.0 for o in found)
    return round(score / len(found), 3)


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
        # The level-change scoring: a drift is right once its one incident is finally named drift with no
        # repeat, half right while still a level change; a rename of a true change is counted, not charged.
        "drift_final_names": {k: sum(1 for o in drifts if o.hit is not None and o.hit_name == k)
                              for k in sorted({o.hit_name for o in drifts if o.hit_name})},
        "drift_named_once_score_of_found": _drift_score(drifts),
        "renames_of_true_changes": sum(o.renames[j] for o in outs for j in range(len(o.alerts))
                                       if o.hit is not None and o.alerts[j][0] == _hit_night(o)),
        "steps_finally_named": {k: sum(1 for o in steps if o.hit_name == k)
                                for k in sorted({o.hit_name for o in steps if o.hit_name})},
        "recall_by_cell_effect_noise": _cells(steps),
    }
