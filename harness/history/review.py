"""After a batch is recorded: read the history, find what is new, record it as alerts, resolve the rest."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness.history.alerts import Alert, case_alerts, new_alerts
from harness.history.detections import findings_of
from harness.history.incidents import Incident, group
from harness.history.series import CasePoints, stored_case_points
from harness.records.outcome import Outcome
from harness.store.store import Store

__all__ = ["Review", "review"]


@dataclass(frozen=True)
class Review:
    new: tuple[Alert, ...]
    resolved: tuple[str, ...]  # fingerprints
    cases: tuple[CasePoints, ...]
    incidents: tuple[Incident, ...] = ()  # the new alerts as incidents, less those joining a known one


def _recovered(row: Mapping[str, object], cp: CasePoints, current: set[str]) -> bool:
    """An event alert is resolved once the case's latest decided point passes; a step or drift once
    the history no longer supports it (a later change undid it)."""
    if row["kind"] in ("step", "drift"):
        labels = [p.build_label for p in cp.points]
        return row["first_bad"] in labels and not current
    decided = [p for p in cp.points if p.outcome is not None]
    return bool(decided) and decided[-1].outcome == Outcome.PASS


def review(store: Store, batch_id: str, *, tolerances: Mapping[str, Mapping[str, float]] | None = None,
           scenarios: set[str] | None = None) -> Review:
    """Detect over every series of ``scenarios`` (all by default); add new alerts, resolve recovered ones."""
    cases = tuple(cp for cp in stored_case_points(store)
                  if scenarios is None or cp.scenario in scenarios)
    known = store.alert_rows()
    # Each series' findings through the store's cache: only the nights since the last review are detected.
    findings = findings_of(store, cases, tolerances)
    candidates: list[Alert] = []
    resolved: list[str] = []
    for cp in cases:
        found = case_alerts(cp, (tolerances or {}).get(cp.scenario),
                            findings=findings[(cp.scenario, cp.case, cp.hardware)])
        candidates += found
        for row in known:
            if (row["state"] != "resolved" and row["scenario"] == cp.scenario and row["case_name"] == cp.case
                    and row["hardware_key"] == cp.hardware):
                current = {a.fingerprint for a in found if a.kind == row["kind"] and a.metric == row["metric"]}
                if _recovered(row, cp, current):
                    resolved.append(str(row["fingerprint"]))
    points_of = {(cp.scenario, cp.case, cp.hardware): cp.points for cp in cases}
    fresh = new_alerts(candidates, known, points_of)
    # A metric confirmed a night after the others, from the same first bad build, joins the incident
    # a person already has: recorded in it, not raised again.
    raised = {(str(r["hardware_key"]), str(r["first_bad"])): str(r["incident"] or r["fingerprint"])
              for r in known if r["state"] != "resolved"}
    incident_of: dict[str, str] = {}
    ringing: list[Incident] = []
    for inc in group(fresh, points_of.values()):
        joined = next((raised[k] for a in inc.alerts if (k := (a.hardware, a.first_bad.build_label)) in raised), None)
        incident_of.update((a.fingerprint, joined or inc.fingerprint) for a in inc.alerts)
        if joined is None:
            ringing.append(inc)
    added = set(store.add_alerts([a.row(batch_id, incident_of[a.fingerprint]) for a in fresh]))
    if resolved:
        store.set_alert_state(resolved, "resolved")
    new = tuple(a for a in fresh if a.fingerprint in added)
    incidents = tuple(i for i in ringing if any(a.fingerprint in added for a in i.alerts))
    return Review(new=new, resolved=tuple(resolved), cases=cases, incidents=incidents)
