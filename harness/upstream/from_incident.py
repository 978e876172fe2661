"""A nightly incident (``--incident ID`` from the results store) as a finding: what moved, since which night.

The incident's lead alert decides: a metric that moved (its nights before and after the first bad build, each
night's trials, charted) or an event (a new signature, pass -> crash or fail). The representative run is a run
of the lead's case on the first bad night, read from the store (its folder may be gone; its record is not).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import select

from harness.incidents.incident import StoredIncident, stored_incidents
from harness.records.outcome import MEASURED, MISBEHAVED, Outcome
from harness.records.run_record import RunRecord, record_from_dict
from harness.series.points import CasePoints, Point, stored_case_points
from harness.store.schema import runs
from harness.store.store import Store
from harness.upstream.finding import Chart, ChartGroup, Finding
from harness.upstream.from_run import scenario_path
from harness.upstream.levels import metric_change
from harness.util.errors import UserError

__all__ = ["CHART_NIGHTS", "find_incident", "finding_from_incident"]

CHART_NIGHTS = 60  # the chart shows at most this many nights, the first bad one among the last


def find_incident(store: Store, ident: str) -> StoredIncident:
    """The incident ``ident`` names (its fingerprint, or one of its alerts'); UserError when none does."""
    for incident in stored_incidents(store.alert_rows()):
        if incident.fingerprint == ident or any(r["fingerprint"] == ident for r in incident.rows):
            return incident
    raise UserError(f"--incident {ident}: no such incident or alert in store {store.where} "
                    "(see: sglang-repro store alerts --all)")


def _case_points(store: Store, lead: Mapping[str, Any]) -> CasePoints:
    for cp in stored_case_points(store):
        if (cp.scenario, cp.case, cp.hardware) == (lead["scenario"], lead["case_name"], lead["hardware_key"]):
            return cp
    raise UserError(f"incident: no nightly runs of {lead['scenario']} [{lead['case_name']}] on {lead['hardware_key']} "
                    "in the store")


def _first_bad(cp: CasePoints, lead: Mapping[str, Any]) -> int:
    labels = [p.build_label for p in cp.points]
    if lead["first_bad"] not in labels:
        raise UserError(f"incident: its first bad build {lead['first_bad']} is not among the case's nights")
    return labels.index(str(lead["first_bad"]))


def _record_of(store: Store, point: Point, lead: Mapping[str, Any]) -> RunRecord:
    """A run of the lead's case on the first bad night: for an event one that shows it, for a metric one measured."""
    query = (select(runs.c.record).where(runs.c.batch_id == point.batch_id)
             .where(runs.c.scenario == lead["scenario"]).where(runs.c.case_name == lead["case_name"])
             .where(runs.c.hardware_key == lead["hardware_key"]).order_by(runs.c.trial))
    found = [record_from_dict(json.loads(text), source=f"store run of night {point.batch_label}")
             for part in store.tuples(query) for (text,) in part]
    if not found:
        raise UserError(f"incident: no run of the first bad night {point.batch_label} in the store")
    wanted = MEASURED if lead["metric"] is not None else MISBEHAVED
    return next((r for r in found if r.outcome in wanted and (lead["signature"] is None or lead["metric"] is not None
                                                              or r.signature == lead["signature"])), found[0])


def finding_from_incident(store: Store, ident: str) -> Finding:
    incident = find_incident(store, ident)
    lead = incident.lead
    cp = _case_points(store, lead)
    bad = _first_bad(cp, lead)
    point = cp.point(bad)
    record = _record_of(store, point, lead)
    folder = next((a for a in point.artifacts if a and _is_run(a)), None)
    common: dict[str, Any] = dict(
        source="incident", source_ref=incident.fingerprint, record=record, run_dir=Path(folder) if folder else None,
        scenario_file=scenario_path(record), since=f"{point.batch_label} ({point.build_spec})",
        last_good=str(lead["last_good"]) if lead["last_good"] else None,
        context=(f"nightly incident {incident.fingerprint} ({incident.status}) on {lead['hardware_key']}: "
                 f"{lead['detail']}", *(f"also moved: {m}" for m in incident.moved[1:])))
    metric = lead["metric"]
    if metric is None or lead["effect"] is None:
        return _event(cp, bad, lead, record, common)
    groups = _groups(cp.points, str(metric), bad)
    before, after = [g for g in groups if not g.bad], [g for g in groups if g.bad]
    if not before or not after:
        raise UserError(f"incident: {metric} has no values on one side of {lead['first_bad']}")
    trials = max(len(g.values) for g in groups)
    change = metric_change(str(metric), before, after, f"{len(before)} nights before the first bad one and "
                           f"{len(after)} from it on (up to {trials} trial(s) a night)")
    chart = Chart(f"{change.label}, {lead['scenario']} [{lead['case_name']}], nightly", change.unit or change.label,
                  tuple(groups))
    return Finding(kind="regression", how_often=f"every night since ({len(after)} nights)", metric=change,
                   chart=chart, **common)


def _is_run(folder: str) -> bool:
    return (Path(folder) / "result.json").is_file()


def _groups(points: Sequence[Point], metric: str, bad: int) -> list[ChartGroup]:
    first = max(0, min(bad - 1, len(points) - CHART_NIGHTS))  # the newest nights, and the last good one among them
    return [ChartGroup(p.batch_label, tuple(p.metrics.get(metric, ())), i >= bad)
            for i, p in enumerate(points) if i >= first and p.metrics.get(metric)]


def _event(cp: CasePoints, bad: int, lead: Mapping[str, Any], record: RunRecord, common: dict[str, Any]) -> Finding:
    if record.outcome not in MISBEHAVED:
        raise UserError(f"incident: its first bad night's run is {record.outcome.value}: nothing to report upstream")
    nights = [p for p in cp.points[bad:] if p.outcome is not None]
    shown = sum(1 for p in nights if p.outcome == record.outcome)
    return Finding(kind="crash" if record.outcome == Outcome.CRASH else "fail",
                   how_often=f"{shown} of {len(nights)} nights since the first bad one", **common)
