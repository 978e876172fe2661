"""After a batch is recorded: read the history, find what is new, and move incidents through their states.

An incident is ``open`` from the night it is raised until it is resolved: ``recovered`` (every
alert's series back at its old level for ``K_NIGHTS`` nights, or an event's case passing again),
``superseded`` (a later change in the same series), ``accepted`` (``store ack``: the new level is
the baseline) or ``by hand`` (``store resolve``). A level change is renamed in place (``step`` or
``drift``) when later nights tell; the incident keeps its fingerprint and every name with its
night, also once accepted (the rename is recorded, not said). An excursion that came back within
``K_NIGHTS`` nights is recorded as ``transient`` and reaches no one. The review returns the night's
transitions only (opened, renamed, resolved): an incident still open is never said twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.alerts.alert import STEP_KINDS, Alert, case_alerts, fingerprint, names_json, new_alerts
from harness.incidents.incident import Incident, group
from harness.records.outcome import Outcome
from harness.series.detections import SeriesFindings, findings_of
from harness.series.points import CasePoints, Point, rule_for, stored_case_points
from harness.series.transients import K_NIGHTS, transient_at_end
from harness.series.young import YoungCase, young_cases
from harness.store.store import Store

__all__ = ["Renamed", "Resolved", "Review", "review"]


@dataclass(frozen=True)
class Renamed:
    """A level change named anew tonight: same incident, same alert, a new name."""

    incident: str
    alert: str
    scenario: str
    case: str
    metric: str | None
    old: str
    new: str
    evidence: str
    upstream: tuple[str, ...] = ()  # the upstream issues filed for the incident (store link)

    def describe(self) -> str:
        return (f"RENAMED incident {self.incident}: {self.old} -> {self.new} ({self.scenario} [{self.case}] "
                f"{self.metric}; {self.evidence})" + (f"; upstream: {', '.join(self.upstream)}" if self.upstream else ""))


@dataclass(frozen=True)
class Resolved:
    """An incident whose last open alert closed tonight."""

    incident: str
    resolution: str  # recovered | superseded
    build: str = ""  # the build of the night that resolved it ("spec (night)")
    upstream: tuple[str, ...] = ()  # the upstream issues filed for the incident (store link): to close now

    def describe(self) -> str:
        return (f"RESOLVED incident {self.incident}: {self.resolution}" + (f" on {self.build}" if self.build else "")
                + (f"; upstream: {', '.join(self.upstream)} (close it)" if self.upstream else ""))


@dataclass(frozen=True)
class Review:
    new: tuple[Alert, ...]
    resolved: tuple[str, ...]  # alert fingerprints resolved tonight
    cases: tuple[CasePoints, ...]
    incidents: tuple[Incident, ...] = ()  # opened tonight: the new alerts as incidents, less those joining one
    renamed: tuple[Renamed, ...] = ()
    closed: tuple[Resolved, ...] = ()  # incidents resolved tonight
    transients: int = 0  # excursions recorded tonight (they reach no one)
    young: tuple[YoungCase, ...] = ()  # cases whose series are too young to judge a change of the minimum effect

    def transitions(self) -> list[str]:
        """What a person reads tonight: incidents opened, renamed and resolved, each once."""
        return ([i.describe() for i in self.incidents] + [r.describe() for r in self.renamed]
                + [c.describe() for c in self.closed])

    def young_lines(self) -> list[str]:
        """Each young case once a night while it is young: what it cannot judge yet (not a transition)."""
        return [y.describe() for y in self.young]


def _back_to_old_level(row: Mapping[str, Any], alert: Alert, cp: CasePoints) -> bool:
    """The series is on the old side of the alert's threshold for the last K_NIGHTS nights since its first bad."""
    if alert.metric is None or alert.threshold is None or alert.effect is None:
        return False
    idx, values = cp.series(alert.metric)
    labels = [cp.point(i).build_label for i in idx]
    if row["first_bad"] not in labels:
        return False
    since = values[labels.index(str(row["first_bad"])):]
    sign = 1.0 if alert.effect > 0 else -1.0
    return len(since) > K_NIGHTS and all(sign * (v - alert.threshold) < 0 for v in since[-K_NIGHTS:])


def _accepted(row: Mapping[str, Any]) -> bool:
    """Resolved by ``store ack`` while the detector may still name it: a person accepted the new level, not
    the name, so a level change accepted before the nights told a step from a drift is still renamed in
    the store (its names end with what the data said, as an open one's do); only no message is sent."""
    return row["state"] == "resolved" and row["resolution"] == "accepted"


def _recovered(row: Mapping[str, Any], cp: CasePoints, current: Alert | None) -> bool:
    """An event alert is recovered once the case's latest decided point passes; a step, drift or level change
    once its series is back at the old level for K_NIGHTS nights, or the history no longer supports it."""
    if row["kind"] in STEP_KINDS:
        labels = [p.build_label for p in cp.points]
        if current is None:
            return row["first_bad"] in labels
        return _back_to_old_level(row, current, cp)
    decided = [p for p in cp.points if p.outcome is not None]
    return bool(decided) and decided[-1].outcome == Outcome.PASS


def _transient_rows(cp: CasePoints, tolerances: Mapping[str, float] | None, batch_id: str,
                    findings: Sequence[SeriesFindings]) -> list[dict[str, Any]]:
    """The excursions of the case's series that came back on the newest night, as ``transient`` rows: each
    judged against the level since the series' newest change (``findings``: the case's, as detected tonight)."""
    rows = []
    since = {s.metric: max((f.index for f in s.findings if f.kind != "suspicious"), default=0) for s in findings}
    for metric in cp.metric_names:
        rule = rule_for(metric, tolerances)
        if rule is None:
            continue
        idx, values = cp.series(metric)
        if not idx or idx[-1] != cp.n_points - 1:
            continue  # the metric has no value tonight
        found = transient_at_end(values, rule, since.get(metric, 0))
        if found is None or not found.regression:
            continue
        first = cp.point(idx[found.index])
        fp = fingerprint("transient", cp.scenario, cp.case, cp.hardware, metric, first.batch_id)
        detail = (f"{metric} {found.effect:+.1%} for {len(values) - 1 - found.index} night(s), then back "
                  f"({found.before:.4g} -> {found.after:.4g})")
        alert = Alert(fp, "transient", cp.scenario, cp.case, cp.hardware, metric, None, cp.point(idx[found.index - 1]),
                      first, found.effect, detail, "", cp.scenario_file)
        rows.append({**alert.row(batch_id), "state": "transient"})
    return rows


_SLIDE_KINDS = ("drift", "level-change")  # the kinds a slide is raised as; "step" is a jump, its own episode


def review(store: Store, batch_id: str, *, tolerances: Mapping[str, Mapping[str, float]] | None = None,
           scenarios: set[str] | None = None, night: str | None = None) -> Review:
    """Detect over every series of ``scenarios`` (all by default); open, rename and resolve incidents.
    ``night``: tonight's label, kept with a resolution (default: the batch id)."""
    cases = tuple(cp for cp in stored_case_points(store)
                  if scenarios is None or cp.scenario in scenarios)
    night = night or next((p.batch_label for cp in cases for p in cp.points[-1:] if p.batch_id == batch_id),
                          batch_id)
    known = store.alert_rows()
    # Each series' findings through the store's cache: only the nights since the last review are detected.
    findings = findings_of(store, cases, tolerances)
    candidates: list[Alert] = []
    recovered: list[str] = []
    renamed: list[Renamed] = []
    transient_rows: list[dict[str, Any]] = []
    for cp in cases:
        series = findings[(cp.scenario, cp.case, cp.hardware)]
        found = case_alerts(cp, (tolerances or {}).get(cp.scenario), findings=series)
        candidates += found
        by_fp = {a.fingerprint: a for a in found}
        transient_rows += _transient_rows(cp, (tolerances or {}).get(cp.scenario), batch_id, series)
        for row in known:
            if (row["state"] != "open" and not _accepted(row) or row["scenario"] != cp.scenario
                    or row["case_name"] != cp.case or row["hardware_key"] != cp.hardware):
                continue
            current = by_fp.get(str(row["fingerprint"]))
            if current is not None and current.kind != row["kind"] and row["kind"] in STEP_KINDS:
                _rename(store, known, row, current, renamed)
            if row["state"] == "open" and _recovered(row, cp, current):
                recovered.append(str(row["fingerprint"]))
    points_of = {(cp.scenario, cp.case, cp.hardware): cp.points for cp in cases}
    fresh = new_alerts(candidates, known, points_of)
    # A later change in the same series supersedes the open one before it.
    superseded = [str(r["fingerprint"]) for r in known if r["state"] == "open" and r["kind"] in STEP_KINDS
                  and str(r["fingerprint"]) not in recovered
                  and any(a.kind in STEP_KINDS and (a.scenario, a.case, a.hardware, a.metric)
                          == (r["scenario"], r["case_name"], r["hardware_key"], r["metric"]) for a in fresh)]
    incident_of, ringing = _incidents(fresh, known, points_of)
    added = set(store.add_alerts([a.row(batch_id, incident_of[a.fingerprint]) for a in fresh]))
    transients = len(store.add_alerts(transient_rows))
    closed = _close(store, known, recovered, superseded, night)
    closed, renamed = _told(store, known, cases, batch_id, closed, renamed)
    new = tuple(a for a in fresh if a.fingerprint in added)
    incidents = tuple(i for i in ringing if any(a.fingerprint in added for a in i.alerts))
    return Review(new=new, resolved=tuple(recovered + superseded), cases=cases, incidents=incidents,
                  renamed=tuple(renamed), closed=closed, transients=transients, young=young_cases(cases, tolerances))


def _rename(store: Store, known: Sequence[Mapping[str, Any]], row: Mapping[str, Any], current: Alert,
            renamed: list[Renamed]) -> None:
    """Record ``row``'s new name; tell it (append to ``renamed``) only when its incident did not bear it yet."""
    store.rename_alert(current.fingerprint, current.kind, current.detail, names_json(current.names))
    incident = str(row["incident"] or row["fingerprint"])
    told = any(str(o["incident"] or o["fingerprint"]) == incident and o["kind"] == current.kind
               for o in known if o["fingerprint"] != row["fingerprint"]) or any(
        r.incident == incident and r.new == current.kind for r in renamed)
    # An accepted incident's name is recorded, and told to no one; so is a member's rename to the name its
    # incident already bears (a metric that joined the slide after it was named).
    if row["state"] == "open" and not told:
        renamed.append(Renamed(incident, current.fingerprint, current.scenario, current.case, current.metric,
                               str(row["kind"]), current.kind, current.names[-1][2] if current.names else ""))


def _incidents(fresh: Sequence[Alert], known: Sequence[Mapping[str, Any]],
               points_of: Mapping[tuple[str, str, str], Sequence[Point]]) -> tuple[dict[str, str], list[Incident]]:
    """Each fresh alert's incident, and the incidents that ring (opened tonight, joining none already open)."""
    # A metric confirmed a night after the others, from the same first bad build, joins the incident
    # a person already has: recorded in it, not raised again.
    raised = {(str(r["hardware_key"]), str(r["first_bad"])): str(r["incident"] or r["fingerprint"])
              for r in known if r["state"] == "open"}
    # A slide has no one first bad build: each metric's start of it is estimated on its own, nights apart. So a
    # slide (or a level change not yet named) on a case whose slide is already an open incident is that episode,
    # seen by another metric: it joins it (issue 35: a drift is named once per episode).
    sliding = {(str(r["hardware_key"]), str(r["scenario"]), str(r["case_name"])): str(r["incident"] or r["fingerprint"])
               for r in known if r["state"] == "open" and r["kind"] in _SLIDE_KINDS}
    incident_of: dict[str, str] = {}
    ringing: list[Incident] = []
    for inc in group(fresh, points_of.values()):
        joined = next((raised[k] for a in inc.alerts if (k := (a.hardware, a.first_bad.build_label)) in raised), None)
        joined = joined or next((sliding[c] for a in inc.alerts if a.kind in _SLIDE_KINDS
                                 and (c := (a.hardware, a.scenario, a.case)) in sliding), None)
        incident_of.update((a.fingerprint, joined or inc.fingerprint) for a in inc.alerts)
        if joined is None:
            ringing.append(inc)
    return incident_of, ringing


def _close(store: Store, known: Sequence[Mapping[str, Any]], recovered: Sequence[str], superseded: Sequence[str],
           night: str) -> tuple[Resolved, ...]:
    """Resolve the alerts; the incidents whose last open alert this was, with how they closed."""
    if recovered:
        store.resolve_alerts(recovered, "recovered", night)
    if superseded:
        store.resolve_alerts(superseded, "superseded", night)
    how = {**{f: "recovered" for f in recovered}, **{f: "superseded" for f in superseded}}
    members: dict[str, list[str]] = {}
    for r in known:
        if r["state"] == "open":
            members.setdefault(str(r["incident"] or r["fingerprint"]), []).append(str(r["fingerprint"]))
    out = []
    for incident, fps in members.items():
        if all(f in how for f in fps):
            kinds = {how[f] for f in fps}
            out.append(Resolved(incident, "superseded" if "superseded" in kinds else "recovered"))
    return tuple(out)


def _told(store: Store, known: Sequence[Mapping[str, Any]], cases: Sequence[CasePoints], batch_id: str,
          closed: tuple[Resolved, ...], renamed: list[Renamed]) -> tuple[tuple[Resolved, ...], list[Renamed]]:
    """Tonight's messages with what a person acts on: the build that resolved an incident (tonight's build of its
    cases) and the upstream issues filed for it (``store link``), so the one who filed them can close them."""
    from dataclasses import replace

    from harness.store.links import links_by_incident

    links = links_by_incident(store)
    tonight = {(cp.scenario, cp.case, cp.hardware): p.build_label for cp in cases for p in cp.points[-1:]
               if p.batch_id == batch_id}
    builds: dict[str, str] = {}
    for r in known:
        build = tonight.get((str(r["scenario"]), str(r["case_name"]), str(r["hardware_key"])))
        if build:
            builds.setdefault(str(r["incident"] or r["fingerprint"]), build)
    return (tuple(replace(c, build=builds.get(c.incident, ""), upstream=links.get(c.incident, ())) for c in closed),
            [replace(r, upstream=links.get(r.incident, ())) for r in renamed])
