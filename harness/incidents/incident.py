"""Incidents: the alerts one change caused, across cases and metrics, as one thing a person reads.

Alerts on the same hardware whose first bad build is the same build on the same night (or a night
or two apart: each metric's change point is estimated on its own) are one incident. Every alert
the nightly raises is a regression, so their directions agree by construction; an event (a new
signature, pass -> crash or fail) is an incident of its own unless a metric alert shares its
first bad build. The incident lists every case and every metric it moved, ranked (events first,
then by the size of the effect), has one fingerprint (of its hardware and first bad build) and
one next step, for its most telling alert:

- ``sglang-repro bisect ... --releases A..B`` when both builds are releases;
- ``sglang-repro bisect ... --repo CHECKOUT --good C1 --bad C2`` when both carry commits;
- no bisect for builds with no history between them (two reference-server specs, two
  ``python:`` environments), but the ``sglang-repro compare`` that confirms the change;
- no earlier build that passed: the ``sglang-repro run`` that reproduces it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.alerts.alert import Alert, bisect_command
from harness.series.points import CasePoints, Point

__all__ = ["Incident", "StoredIncident", "group", "next_step", "stored_incidents"]

NEARBY_NIGHTS = 2
EVENT_KINDS = ("new-signature", "pass-to-crash", "pass-to-fail")


@dataclass(frozen=True)
class Incident:
    fingerprint: str
    hardware: str
    alerts: tuple[Alert, ...]  # ranked: events first, then by |effect|

    @property
    def lead(self) -> Alert:
        return self.alerts[0]

    @property
    def cases(self) -> list[str]:
        return sorted({f"{a.scenario} [{a.case}]" for a in self.alerts})

    @property
    def next_step(self) -> str:
        return next_step(self.lead)

    def describe(self) -> str:
        lead = self.lead
        good = lead.last_good.build_label if lead.last_good else "none recorded"
        moved = ", ".join(f"{a.metric or a.kind} {a.effect:+.1%} [{a.case}]" if a.effect is not None
                          else f"{a.kind} {a.signature or ''} [{a.case}]".replace("  ", " ") for a in self.alerts)
        return (f"INCIDENT {self.fingerprint} on {self.hardware}: {len(self.alerts)} alert(s), "
                f"{lead.kind.upper()} {lead.detail}\n"
                f"    cases: {', '.join(self.cases)}\n"
                f"    moved: {moved}\n"
                f"    last good: {good}\n    first bad: {lead.first_bad.build_label}\n"
                f"    next: {self.next_step}")


def next_step(alert: Alert) -> str:
    """The command that runs as printed for what the two builds are (``alerts.bisect_command``)."""
    cp = CasePoints(alert.scenario, alert.scenario_file or alert.scenario, alert.case, alert.hardware, ())
    return bisect_command(cp, alert.last_good, alert.first_bad, signature=alert.signature,
                          metric=alert.metric, threshold=alert.threshold)


def _rank(a: Alert) -> tuple[int, float]:
    return (0 if a.kind in EVENT_KINDS else 1, -abs(a.effect or 0.0))


def _night_order(points: Iterable[Sequence[Point]]) -> Mapping[str, int]:
    """Batch id -> its place among every night seen, by start time."""
    starts = {p.batch_id: p.started_at for pts in points for p in pts}
    return {b: i for i, b in enumerate(sorted(starts, key=lambda b: (starts[b], b)))}


def group(alerts: Sequence[Alert], points: Iterable[Sequence[Point]] = ()) -> list[Incident]:
    """The incidents of ``alerts``: same hardware, first bad builds of the same build within NEARBY_NIGHTS nights."""
    order = _night_order(points)
    groups: list[list[Alert]] = []
    for a in sorted(alerts, key=lambda a: order.get(a.first_bad.batch_id, 0)):
        here = order.get(a.first_bad.batch_id)
        for g in groups:
            first = g[0].first_bad
            there = order.get(first.batch_id)
            near = first.batch_id == a.first_bad.batch_id or (
                here is not None and there is not None and abs(here - there) <= NEARBY_NIGHTS)
            if g[0].hardware == a.hardware and near and first.build_key == a.first_bad.build_key:
                g.append(a)
                break
        else:
            groups.append([a])
    out = []
    for g in groups:
        first = g[0].first_bad
        fp = hashlib.sha256(f"incident\x1f{g[0].hardware}\x1f{first.batch_id}\x1f{first.build_key}".encode())
        out.append(Incident(fp.hexdigest()[:20], g[0].hardware, tuple(sorted(g, key=_rank))))
    return out


@dataclass(frozen=True)
class StoredIncident:
    """An incident as the store keeps it: the alert rows that share its fingerprint, ranked as ``Incident``."""

    fingerprint: str
    rows: tuple[Mapping[str, Any], ...]

    @property
    def lead(self) -> Mapping[str, Any]:
        return self.rows[0]

    @property
    def state(self) -> str:
        """One state: open while any alert is, transient when every alert is, else resolved."""
        states = {str(r["state"]) for r in self.rows}
        if "open" in states:
            return "open"
        return "transient" if states == {"transient"} else "resolved"

    @property
    def resolution(self) -> str | None:
        """How a resolved incident was resolved: accepted over by hand over superseded over recovered."""
        if self.state != "resolved":
            return None
        how = {str(r.get("resolution") or "") for r in self.rows}
        return next((h for h in ("accepted", "by hand", "superseded", "recovered") if h in how), None)

    @property
    def status(self) -> str:
        """The state as a person reads it: ``open``, ``resolved: accepted``, ``transient``."""
        return f"resolved: {self.resolution}" if self.resolution else self.state

    @property
    def opened(self) -> str:
        """The night it opened: its first bad build's night (the label in ``spec (label)``)."""
        bad = str(self.lead["first_bad"])
        return bad[bad.rfind("(") + 1:-1] if bad.endswith(")") and "(" in bad else bad

    @property
    def closed(self) -> str | None:
        nights = sorted(str(r["closed_at"]) for r in self.rows if r.get("closed_at"))
        return nights[-1] if nights and self.state == "resolved" else None

    @property
    def names(self) -> list[tuple[str, str, str]]:
        """Its lead change's names over its nights: (night, name, evidence); one entry when never renamed."""
        raw = self.lead.get("names")
        if raw:
            try:
                return [(str(n["night"]), str(n["name"]), str(n["evidence"])) for n in json.loads(str(raw))]
            except (ValueError, KeyError, TypeError):
                pass  # a row written by hand: its kind alone
        return [(self.opened, str(self.lead["kind"]), "")]

    @property
    def cases(self) -> list[str]:
        return sorted({f"{r['scenario']} [{r['case_name']}]" for r in self.rows})

    @property
    def moved(self) -> list[str]:
        return [f"{r['metric'] or r['kind']} {float(r['effect']):+.1%} [{r['case_name']}]" if r["effect"] is not None
                else f"{r['kind']} {r['signature'] or ''} [{r['case_name']}]".replace("  ", " ") for r in self.rows]

    def describe(self) -> str:
        lead = self.lead
        names = " -> ".join(f"{k} ({n})" for n, k, _ in self.names)
        closed = f", closed {self.closed}" if self.closed else ""
        return (f"INCIDENT {self.fingerprint} {self.status} on {lead['hardware_key']}: {len(self.rows)} alert(s), "
                f"{str(lead['kind']).upper()} {lead['detail']}\n"
                f"    nights: opened {self.opened}{closed}; names: {names}\n"
                f"    cases: {', '.join(self.cases)}\n"
                f"    moved: {', '.join(self.moved)}\n"
                f"    last good: {lead['last_good'] or 'none recorded'}\n    first bad: {lead['first_bad']}\n"
                f"    next: {lead['bisect']}\n"
                f"    alerts: {' '.join(str(r['fingerprint']) for r in self.rows)}")


def _row_rank(r: Mapping[str, Any]) -> tuple[int, float]:
    return (0 if r["kind"] in EVENT_KINDS else 1, -abs(float(r["effect"] or 0.0)))


def stored_incidents(rows: Sequence[Mapping[str, Any]]) -> list[StoredIncident]:
    """The store's alert rows as incidents (a row recorded before incidents is one of its own), oldest first."""
    members: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        members.setdefault(str(r.get("incident") or r["fingerprint"]), []).append(r)
    return [StoredIncident(fp, tuple(sorted(m, key=_row_rank))) for fp, m in members.items()]
