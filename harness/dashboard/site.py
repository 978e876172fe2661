"""``sglang-repro dashboard``: a static site from the results store that works offline and from a CI artifact.

- ``index.html``: every scenario case x hardware with its latest outcome, sparklines (inline SVG) of
  acceptance length and output throughput, the noise of each (the robust spread of the points around
  their level, %: a step is not noise), and every incident, open and closed, with its names and
  state over its nights.
- ``scenario-<name>.html``: interactive time series by build (plotly; the x axis names builds, the
  night's date on hover), change points, host changes (driver, CUDA, kernel) and every incident that
  names the case (on each of its charts) marked, links to
  each point's run folders labelled by trial; for a stateful workload, its last nights' figures per phase
  (acceptance by draft position, over the phase's time, by cache state).
- ``plotly.min.js`` (copied once from the plotly package) and ``dashboard.js`` beside the pages.

Every page carries a content security policy that allows nothing remote (scripts from the site's
own folder only), and every string that came from a log, a flag, a build or a scenario is escaped;
the chart data travels in a JSON block whose ``<``, ``>`` and ``&`` are escaped too.
"""

from __future__ import annotations

import functools
import hashlib
import html
import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.resources import as_file, files
from pathlib import Path
from typing import Any

import numpy as np

from harness.incidents.incident import StoredIncident, stored_incidents
from harness.records.metric_definitions import COMPARED, PHASE_SEPARATOR
from harness.records.outcome import Outcome
from harness.series.detections import SeriesFindings, findings_of
from harness.series.points import SERIES_KINDS, CasePoints, Point, host_changes, stored_case_points
from harness.series.steps import LARGE_CHANGE, MATURE_NIGHTS, noise
from harness.series.young import young_series
from harness.store.store import Store
from harness.util.atomic import replace_with, write_atomic
from harness.util.collector import collector_paused

__all__ = ["CSP", "FIT", "build_site"]

CSP = ("default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'none'; font-src 'none'; frame-src 'none'; base-uri 'none'; form-action 'none'")
SPARK_METRICS = tuple(m.name for m in COMPARED)
# Tables in a window of 1400 px: each in a box that scrolls sideways within itself when it is wider, and the
# incident and run tables as wide as the page, their cells (a next step's command) wrapping anywhere to fit.
FIT = (".scroll{max-width:100%;overflow-x:auto}table.incidents,table.other-runs{width:100%}"
       "table.incidents td,table.other-runs td,td code{overflow-wrap:anywhere}td code{white-space:pre-wrap}"
       "ul.names{min-width:11em;padding-left:1.2em}")
_STYLE = """body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:middle}th{background:#f3f3f3}
.pass{color:#1a7f37}.fail,.crash{color:#c62828;font-weight:bold}.infra,.timeout{color:#8a6d00}
.chart{margin-bottom:1em}.note{color:#666;font-size:12px}code{font-size:12px}
.buildmark{display:block;color:#8a6d00;font-size:12px}.young{color:#8a6d00;font-size:12px}
""" + FIT



def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _scroll(table: str) -> str:
    """A table in a box of the page's width that scrolls sideways within itself when the table is wider (a next
    step's command, a long case name): the page itself never does."""
    return f'<div class="scroll">{table}</div>' if table else ""


def _build_cell(text: str, spec: str) -> str:
    """A build as a table shows it, marked as what it is when it is not SGLang on its scenario's hardware (the
    reference server, the real-SGLang CPU build): the mark the pages' notice says those builds carry."""
    from harness.build.labels import build_label

    label = build_label(spec)
    return _e(text) + (f'<span class="buildmark">{_e(label)}</span>' if label else "")


def _slug(name: str) -> str:
    """A page name for a scenario: readable, and unique (two names sharing their first 80 characters, or
    differing only in characters the slug drops, would otherwise write one page over the other)."""
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.")[:80] or "scenario"
    if readable == name:
        return name  # nothing dropped or cut: no other name maps here
    return f"{readable}-{hashlib.sha256(name.encode('utf-8', 'surrogateescape')).hexdigest()[:10]}"


def _pe(text: object) -> str:
    """Escaped for plotly: it renders a subset of HTML (<a href>, <b>, <br>) in titles, ticks, hover text
    and annotations, and decodes entities, so a case named ``<a href=...>`` would be a live link."""
    return html.escape(str(text), quote=True)


def _json_block(data: Any) -> str:
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _page(title: str, body: str, scripts: Sequence[str] = ()) -> str:
    tags = "".join(f'<script src="{_e(s)}"></script>' for s in scripts)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{_e(CSP)}">'
            f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>{body}{tags}</body></html>\n")


def _sparkline(values: Sequence[float], width: int = 120, height: int = 24) -> str:
    if len(values) < 2:
        return ""
    y = np.asarray(values[-60:], dtype=float)
    lo, hi = float(y.min()), float(y.max())
    span = hi - lo or 1.0
    pts = " ".join(f"{i * (width - 2) / (len(y) - 1) + 1:.1f},{height - 1 - (v - lo) / span * (height - 2):.1f}"
                   for i, v in enumerate(y))
    return (f'<svg width="{width}" height="{height}" role="img"><polyline fill="none" stroke="#3461c1" '
            f'stroke-width="1.2" points="{pts}"/></svg>')


def _noise(values: Sequence[float]) -> str:
    """The spread around the level, robust to a step: from first differences (a step moves one of
    them), not a CV across the step (a clean 66% step would read as 46% noise)."""
    if len(values) < 3:
        return ""
    y = np.asarray(values[-30:], dtype=float)
    level = float(np.median(y))
    return f"{100 * noise(y) / level:.1f}%" if level else ""


@dataclass(frozen=True)
class _Chart:
    data: dict[str, Any]
    html: str


@dataclass(frozen=True)
class _CaseCharts:
    """A case's charts and what they share: each point's tick (its build's name) and hover label, once for
    the case (every metric's chart of it names the same builds: 7 copies of 365 labels were most of a page)."""
    axis: dict[str, list[str | None]]
    charts: list[_Chart]


def _build_name(commit: str | None, spec: str, version: str | None) -> str:
    """What the x axis calls a point: the short commit, a release's version, else the spec (the reference
    server's builds share one version string, and their spec is what tells them apart)."""
    if commit:
        return commit[:9]
    return version if spec.startswith("pip:") and version else spec


def _point_name(p: Point) -> str:
    return _build_name(p.build_commit, p.build_spec, p.build_version)


class _Escaped(dict[str, str]):
    """``_pe`` of each text once: the 200 cases of a year share the same 365 builds and nights, so the
    labels of their 73k points are a few hundred distinct strings."""

    def __missing__(self, text: str) -> str:
        self[text] = got = _pe(text)
        return got


def _incident_marks(cp: CasePoints, incidents: Sequence[StoredIncident]) -> list[dict[str, Any]]:
    """A mark at the first bad build of every incident that names this case, on each of its charts: the
    incident is one change, and the metrics it did not move are part of the picture."""
    named = [(inc, [r for r in inc.rows if r["scenario"] == cp.scenario and r["case_name"] == cp.case
                    and r["hardware_key"] == cp.hardware]) for inc in incidents if inc.state != "transient"]
    named = [(inc, rows) for inc, rows in named if rows]
    if not named:
        return []  # no incident names the case: its points' labels are not needed
    at = {label: i for i, label in enumerate(cp.build_labels())}
    marks = []
    for inc, rows in named:
        here = [r for r in rows if r["first_bad"] in at]
        if here:
            marks.append({"x": at[str(here[0]["first_bad"])], "kind": "incident",
                          "color": "#e65100" if inc.state == "open" else "#9e9e9e",
                          "text": _pe(f"incident {inc.fingerprint[:8]} ({inc.status}, {str(inc.lead['kind'])}, "
                                      f"{len(inc.rows)} alert(s))")})
    return marks


def _charts(cp: CasePoints, n: int, found: Sequence[SeriesFindings],
            incidents: Sequence[StoredIncident] = (), axis: int = 0, escaped: _Escaped | None = None) -> _CaseCharts:
    """The case's charts; ``axis``: the position of the case's ticks and labels in the page's ``cases``."""
    esc = _Escaped() if escaped is None else escaped
    out: list[_Chart] = []
    marks = _incident_marks(cp, incidents)
    # A point's tick and hover label are the same in every metric's chart of the case: escaped once, kept
    # once (by point index; null for a point no chart shows). Read from the case's columns: no point is made.
    ticks: list[str | None] = [None] * cp.n_points
    labels: list[str | None] = [None] * cp.n_points
    shown = sorted({i for sf in found for i in sf.indices})
    if shown:
        commit, spec, version = cp.column("build_commit"), cp.column("build_spec"), cp.column("build_version")
        night, started = cp.column("batch_label"), cp.column("started_at")
        for i in shown:
            # the night's date under the build's name: nights of one build are told apart without hovering
            ticks[i] = f"{esc[_build_name(commit[i], spec[i], version[i])]}<br>{esc[started[i][5:10]]}"
            labels[i] = f"{esc[f'{spec[i]} ({night[i]})']}<br>{esc[started[i][:10]]}"
    # A host fact that changed on a night (driver, CUDA, kernel): shown, so a step that coincides is explained.
    hosts: list[dict[str, Any]] = [{"x": i, "kind": "host", "color": "#6a1b9a", "text": _pe(text)}
                                   for i, text in host_changes(cp)]
    crashes = _crash_marks(cp)
    for sf in found:
        idx = list(sf.indices)
        chart_id = f"c{n}-{len(out)}"
        known = cp.series_columns(sf.metric)
        data: dict[str, Any] = {"id": chart_id, "metric": _pe(sf.metric),
                                "title": _pe(f"{cp.case} · {sf.metric} · {cp.hardware}"), "axis": axis, "x": idx}
        if known is not None and len(known.index) == len(idx) and known.index.tolist() == idx:
            values: list[Any] = known.values.tolist()
            one_trial = known.one_trial
            trials_x, trials_y = np.repeat(known.index, known.counts).tolist(), known.flat.tolist()
        else:  # findings of other points than the case's series: each point's value, as asked
            values = [cp.point(i).value(sf.metric) for i in idx]
            trials = [cp.point(i).metrics.get(sf.metric, ()) for i in idx]
            one_trial = all(len(t) == 1 for t in trials) and [t[0] for t in trials] == values
            trials_x = [i for i, t in zip(idx, trials) for _ in t]
            trials_y = [v for t in trials for v in t]
        changes = [{"x": idx[f.index], "kind": f.kind,
                    "color": "#c62828" if f.regression else "#1a7f37",
                    "text": _pe(f"{f.kind} {f.effect:+.1%}")} for f in sf.findings]
        changes += hosts
        changes += marks
        changes += crashes
        data.update(y=values, changes=changes)
        if one_trial:
            data["trials_same"] = True  # one trial a point, its value: the trials' dots are the points
        else:
            data.update(trials_x=trials_x, trials_y=trials_y)
        out.append(_Chart(data, f'<div class="chart" id="{_e(chart_id)}"></div>'))
    return _CaseCharts({"ticks": ticks, "labels": labels}, out)


def _upstream(urls: Sequence[str]) -> str:
    """The upstream issues filed for an incident (``store link``), as links; an address that is not http(s) (a row
    written by hand) is shown as text, never as an href."""
    shown = [f"<a href=\"{_e(u)}\">{_e(u)}</a>" if u.startswith(("https://", "http://")) else _e(u) for u in urls]
    return "<br>".join(shown)


def _incidents_table(incidents: Sequence[StoredIncident], upstream: Mapping[str, Sequence[str]] | None = None) -> str:
    """Incidents as the store keeps them (``store alerts --all``), open ones first, then closed ones newest
    first: one row each, its state (how it closed), its names over its nights (a level change renamed in
    place), the nights it opened and closed, its cases and what moved, its next step and the fingerprint
    ``store ack`` takes. A transient reached no one and is not listed."""
    shown = [i for i in incidents if i.state != "transient"]
    if not shown:
        return "<p>No incidents.</p>"
    shown = ([i for i in shown if i.state == "open"]
             + sorted((i for i in shown if i.state != "open"), key=lambda i: i.closed or "", reverse=True))
    body = []
    for inc in shown:
        lead = inc.lead
        names = "".join(f"<li>{_e(night)}: <b>{_e(name)}</b>{' (' + _e(why) + ')' if why else ''}</li>"
                        for night, name, why in inc.names)
        body.append(
            f"<tr class=\"incident\" data-state=\"{_e(inc.state)}\"><td>{_e(inc.status)}</td>"
            f"<td><ul class=\"names\">{names}</ul></td>"
            f"<td>opened {_e(inc.opened)}{'<br>closed ' + _e(inc.closed) if inc.closed else ''}</td>"
            f"<td>{_e(lead['kind'])} ({len(inc.rows)} alert(s))</td>"
            f"<td>{_e(', '.join(inc.cases))}</td><td>{_e(', '.join(inc.moved))}</td>"
            f"<td>{_e(lead['last_good'] or '')}</td><td>{_e(lead['first_bad'])} on {_e(lead['hardware_key'])}</td>"
            f"<td><code>{_e(lead['bisect'])}</code></td><td><code>{_e(inc.fingerprint)}</code></td>"
            f"<td class=\"upstream\">{_upstream((upstream or {}).get(inc.fingerprint, ()))}</td></tr>")
    return _scroll("<table class=\"incidents\"><tr><th>state</th><th>names over its nights</th><th>nights</th>"
            "<th>incident</th><th>cases</th><th>moved</th><th>last good</th>"
            f"<th>first bad</th><th>next step</th><th>fingerprint</th><th>upstream</th></tr>{''.join(body)}</table>")


def _young_note(cp: CasePoints) -> str:
    """The case's series too young to judge a change of the minimum effect, and what each can judge now."""
    young = young_series(cp)
    if not young:
        return ""
    return ('<p class="note young">Young series (a change of the minimum effect is judged from '
            f"{MATURE_NIGHTS} nights on): " + "; ".join(f"{_e(y.metric)}: {_e(y.text)}" for y in young) + "</p>")


def _resets(cp: CasePoints, found: Sequence[SeriesFindings]) -> str:
    """When each series' baseline was reset (a confirmed step starts a new segment) and why."""
    items = [f"{sf.metric}: from {cp.point(sf.indices[f.index]).build_label}, {f.kind} {f.effect:+.1%}"
             for sf in found for f in sf.findings if f.kind in ("step", "level-change", LARGE_CHANGE)]
    if not items:
        return '<p class="note">Baselines: never reset (no confirmed step).</p>'
    return '<p class="note">Baseline reset: ' + "; ".join(_e(i) for i in items) + "</p>"


class _Links:
    """Links to run folders, each folder resolved once a build (and the site's folder once): a year's
    pages link 1600 of them, and every resolve is a walk of the file system."""

    def __init__(self, out_dir: Path) -> None:
        self.site = out_dir.resolve()
        self.known: dict[str, tuple[str, str]] = {}

    def __call__(self, path: str, label: str) -> str:
        got = self.known.get(path)
        if got is None:
            # Relative, so the site and the run folders can move together (a CI artifact); absolute otherwise.
            target = Path(path).resolve()
            try:
                href = Path(os.path.relpath(target, self.site)).as_posix()
            except ValueError:  # another drive
                href = target.as_uri()
            if _SCHEME.match(href) and not href.startswith("file:"):
                href = ""  # "javascript:..." from an imported record's artifacts: the CSP blocks it; never a link
            got = self.known[path] = (_e(href), _e(target.name))
        if not got[0]:
            return _e(label)
        return f'<a href="{got[0]}/" title="{got[1]}">{_e(label)}</a>'


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")  # a relative href that a browser would read as a URL scheme


def _phases(cp: CasePoints, nights: int = 3) -> str:
    """A stateful workload's figures per phase for the case's last nights that ran phases: acceptance by
    draft position, over the phase's time and by cache state, which no nightly chart shows."""
    if not any(PHASE_SEPARATOR in name for name in cp.metric_names):
        return ""  # no phases: neither a scan of every point nor the report's import (scipy's, a second)
    from harness.report import phase_rows_of, phase_table

    # The points that ran phases are those in a phase figure's series: only the last of them are made.
    with_phases: set[int] = set()
    for name in cp.metric_names:
        known = cp.series_columns(name) if PHASE_SEPARATOR in name else None
        if known is not None:
            with_phases.update(known.index.tolist())
    recent = [cp.point(i) for i in sorted(with_phases)[-nights:]]
    rows = [row for p in recent for row in phase_rows_of(f"{_point_name(p)} ({p.batch_label})", p.metrics)]
    table = phase_table(rows, first="Build (night)")
    return ('<p class="note">Workload phases, last nights (one server, no flush between phases; medians over '
            f"trials):</p>{_scroll(table)}") if table else ""


# The latest points of a case listed under its charts (with their builds, profiles and artifacts).
_SHOWN_POINTS = 8
NOISE_NOTE = ("noise: the robust spread of a series' nights around its level, in % of the level (a confirmed step "
              "is not counted as noise); a change smaller than it is not raised as an incident.")


def _drawable(cp: CasePoints, found: Sequence[SeriesFindings]) -> list[SeriesFindings]:
    """The series to chart: those detection judged, and the overview's metrics with too few passing nights to be
    judged (a case that crashed on most nights still shows the nights it passed, with its crashes marked)."""
    have = {sf.metric for sf in found}
    short = []
    for metric in SPARK_METRICS:
        idx, values = cp.series(metric)
        if metric not in have and values:
            short.append(SeriesFindings(metric, tuple(idx), ()))
    return [*found, *short]


def _crash_marks(cp: CasePoints) -> list[dict[str, Any]]:
    """A mark on every night the case crashed: no value is drawn there, so the gap is explained."""
    # Only the nights without a value of the charted metrics are looked at (a point is made for each of them):
    # a year of healthy nights costs nothing here.
    valued = {i for metric in SPARK_METRICS for i in cp.series(metric)[0]}
    return [{"x": i, "kind": "crash", "color": "#b42318", "text": "crash"}
            for i in range(cp.n_points) if i not in valued and cp.point(i).outcome == Outcome.CRASH]


def _reference_banner(cases: Sequence[CasePoints]) -> str:
    """Said on every page that shows builds of the CPU reference server (its numbers are not SGLang's) or of the
    real-SGLang CPU build (SGLang's own code, but plain-torch kernels: never a GPU figure)."""
    from harness.build.labels import CPU_BUILD_NOTICE, REFERENCE_NOTICE, runs_on_cpu

    specs = [cp.point(-1).build_spec for cp in cases if cp.n_points]
    banner = ""
    if any(spec.startswith(("sim:", "simsrc:")) for spec in specs):
        banner += f'<p class="note reference">{_e(REFERENCE_NOTICE)}</p>'
    if any(runs_on_cpu(spec) for spec in specs):
        banner += f'<p class="note reference">{_e(CPU_BUILD_NOTICE)}</p>'
    return banner


_OTHER_RUNS = 200  # the newest runs of other kinds read; a scenario's page lists its newest 20 of them


@dataclass(frozen=True)
class _OtherRun:
    kind: str
    scenario: str
    case: str
    spec: str
    trial: int
    outcome: str
    signature: str | None
    started_at: str
    artifacts: str


def _other_runs(store: Store, kinds: Sequence[str]) -> list[_OtherRun]:
    """The newest runs the charts leave out (a one-off run, a compare, a pytest session, a bisect's or a minimize's
    tries): kept in the store and shown apart, never as nights of a series."""
    from sqlalchemy import select

    from harness.store.schema import builds, runs

    query = (select(runs.c.kind, runs.c.scenario, runs.c.case_name, builds.c.spec, runs.c.trial, runs.c.outcome,
                    runs.c.signature, runs.c.started_at, runs.c.artifacts)
             .join(builds, builds.c.key == runs.c.build_key).where(runs.c.kind.not_in(list(kinds)))
             .order_by(runs.c.started_at.desc(), runs.c.run_id).limit(_OTHER_RUNS))
    c = store.columns(query)
    return [_OtherRun(*row) for row in zip(*(c[name] for name in ("kind", "scenario", "case_name", "spec", "trial",
                                                                   "outcome", "signature", "started_at", "artifacts")))]


def _other_runs_table(shown: Sequence[_OtherRun], link: _Links, pages: Mapping[str, str] | None = None) -> str:
    """Runs of other kinds, newest first: what was tried beside the nightly, apart from its series."""
    if not shown:
        return ""
    rows = "".join(
        f"<tr><td>{_e(r.started_at[:16].replace('T', ' '))}</td><td>{_e(r.kind)}</td>"
        + (f"<td><a href=\"{_e(pages[r.scenario])}\">{_e(r.scenario)}</a></td>" if pages and r.scenario in pages
           else f"<td>{_e(r.scenario)}</td>" if pages is not None else "")
        + f"<td>{_e(r.case)}</td><td>{_build_cell(r.spec, r.spec)}</td>"
        f"<td class=\"{_e(r.outcome)}\">{_e(r.outcome)}</td><td>{_e(r.signature or '')}</td>"
        f"<td>{link(r.artifacts, f'trial {r.trial}') if r.artifacts else ''}</td></tr>" for r in shown)
    head = "<th>started</th><th>kind</th>" + ("<th>scenario</th>" if pages is not None else "")
    return ("<h2>Other runs</h2><p class=\"note\">One-off runs, compares, pytest sessions and the tries of bisect "
            "and minimize, newest first: kept in the store, never nights of the series above (<code>dashboard --kinds</code> "
            "charts them too).</p>"
            + _scroll(f"<table class=\"other-runs\"><tr>{head}<th>case</th><th>build</th><th>outcome</th>"
                      f"<th>signature</th><th>artifacts</th></tr>{rows}</table>"))


def _scenario_page(name: str, cases: Sequence[CasePoints], incidents: Sequence[StoredIncident], out_dir: Path,
                   start: int, findings: dict[tuple[str, str, str], list[SeriesFindings]],
                   escaped: _Escaped | None = None, links: _Links | None = None,
                   profiles: Mapping[str, str] | None = None,
                   upstream: Mapping[str, Sequence[str]] | None = None,
                   others: Sequence[_OtherRun] = ()) -> str:
    link = _Links(out_dir) if links is None else links
    parts = [f"<p><a href=\"index.html\">&larr; overview</a></p><h1>{_e(name)}</h1>" + _reference_banner(cases)]
    data: list[dict[str, Any]] = []
    axes: list[dict[str, list[str | None]]] = []
    for k, cp in enumerate(cases):
        parts.append(f"<h2>{_e(cp.case)} <span class=\"note\">on {_e(cp.hardware)}</span></h2>")
        found = findings[(cp.scenario, cp.case, cp.hardware)]
        drawn = _charts(cp, start + k, _drawable(cp, found), incidents, axis=len(axes), escaped=escaped)
        axes.append(drawn.axis)
        for chart in drawn.charts:
            data.append(chart.data)
            parts.append(chart.html)
        parts.append(_resets(cp, found))
        parts.append(_young_note(cp))
        parts.append(_phases(cp))
        last = [cp.point(i) for i in range(max(0, cp.n_points - _SHOWN_POINTS), cp.n_points)]
        rows = "".join(
            f"<tr><td>{cp.n_points - len(last) + j}</td><td>{_build_cell(p.build_label, p.build_spec)}</td>"
            f"<td class=\"profile\">{_e((profiles or {}).get(p.build_key, ''))}</td>"
            f"<td class=\"{_e(p.outcome.value if p.outcome else 'infra')}\">"
            f"{_e(p.outcome.value if p.outcome else 'not decided')}</td><td>{_e(', '.join(p.signatures))}</td>"
            f"<td>{' '.join(link(a, f'trial {t}') for t, a in enumerate(p.artifacts[:5]))}</td></tr>"
            for j, p in enumerate(last))
        parts.append(_scroll("<table><tr><th>point</th><th>build</th><th>build profile</th><th>outcome</th>"
                             f"<th>signature</th><th>artifacts</th></tr>{rows}</table>"))
    parts.append("<h2>Incidents</h2>"
                 + _incidents_table([i for i in incidents if any(r["scenario"] == name for r in i.rows)], upstream))
    parts.append(_other_runs_table([r for r in others if r.scenario == name][:20], link))
    parts.append(f'<script type="application/json" id="series-data">{_json_block({"cases": axes, "charts": data})}'
                 "</script>")
    return _page(f"{name} · sglang-repro", "".join(parts), scripts=("plotly.min.js", "dashboard.js"))


def _index(by_scenario: dict[str, list[CasePoints]], pages: dict[str, str], incidents: Sequence[StoredIncident],
           where: str, profiles: Mapping[str, str] | None = None,
           upstream: Mapping[str, Sequence[str]] | None = None, others: Sequence[_OtherRun] = (),
           link: _Links | None = None) -> str:
    rows = []
    for name, cases in by_scenario.items():
        for cp in cases:
            last = cp.point(-1) if cp.n_points else None
            outcome = last.outcome.value if last and last.outcome else "not decided"
            cells = []
            young = {y.metric: y for y in young_series(cp)}
            for metric in SPARK_METRICS:
                _, values = cp.series(metric)
                # A young series says what it cannot judge yet, where its noise would be (issue 47).
                spread = (f'<span class="young">{_e(young[metric].text)}</span>' if metric in young
                          else _e(_noise(values)))
                cells.append(f"<td>{_sparkline(values)}</td><td>{spread}</td>")
            rows.append(f"<tr><td><a href=\"{_e(pages[name])}\">{_e(name)}</a></td><td>{_e(cp.case)}</td>"
                        f"<td>{_e(cp.hardware)}</td><td class=\"{_e(outcome)}\">{_e(outcome)}</td>"
                        f"<td>{_build_cell(last.build_label, last.build_spec) if last else ''}</td>"
                        f"<td class=\"profile\">{_e((profiles or {}).get(last.build_key, '') if last else '')}</td>"
                        f"{''.join(cells)}</tr>")
    table = _scroll("<table><tr><th>scenario</th><th>case</th><th>hardware</th><th>latest</th><th>build</th>"
                    "<th>build profile</th>"
                    + "".join(f"<th>{_e(m.heading)}</th><th>noise</th>" for m in COMPARED) + "</tr>"
                    + "".join(rows) + "</table>")
    every = [cp for cases in by_scenario.values() for cp in cases]
    body = (f"<h1>sglang-repro nightly</h1>{_reference_banner(every)}<p class=\"note\">store: {_e(where)}</p>{table}"
            f"<p class=\"note\">{_e(NOISE_NOTE)}</p>"
            f"<h2>Incidents</h2>{_incidents_table(incidents, upstream)}"
            + (_other_runs_table(others, link, pages) if link is not None else ""))
    return _page("sglang-repro dashboard", body)


def build_site(store: Store, out_dir: Path, kinds: Sequence[str] = SERIES_KINDS) -> Path:
    """Write the site into ``out_dir``; the path of its ``index.html``. Every file goes through
    :func:`harness.util.atomic.replace_with`, which refuses to write over a link, device or FIFO found there.
    ``kinds``: the run kinds the charts and detection read (nightly runs by default); the others are listed apart."""
    with collector_paused():  # a year of points alive throughout
        return _build_site(store, out_dir, kinds)


def _profiles(store: Store, cases: Sequence[CasePoints]) -> dict[str, str]:
    """What each build the pages show *is* (harness.contract.profile: is the fix in, the eager rule, ...; for the
    reference server, the release rules it follows), in one line per build key: the builds of each case's last
    points only, one stored record each."""
    from harness.contract.profile import describe_profile

    keys = {cp.point(i).build_key for cp in cases for i in range(max(0, cp.n_points - _SHOWN_POINTS), cp.n_points)}
    return {key: describe_profile(profile) or "not recorded" for key, profile in store.build_profiles(keys).items()}


def _build_site(store: Store, out_dir: Path, kinds: Sequence[str]) -> Path:
    from harness.util.output_path import check_file_in, make_folder

    make_folder(out_dir, "-o")
    cases = stored_case_points(store, kinds)
    others = _other_runs(store, kinds)
    findings = findings_of(store, cases)  # once per series, from the store's cache where it holds
    incidents = stored_incidents(store.alert_rows())
    from harness.store.links import links_by_incident

    upstream = links_by_incident(store)
    by_scenario: dict[str, list[CasePoints]] = {}
    for cp in cases:
        by_scenario.setdefault(cp.scenario, []).append(cp)
    pages = {name: f"scenario-{_slug(name)}.html" for name in by_scenario}
    # Every target checked before the first is written: a linked index.html is refused with nothing written.
    for page in ("plotly.min.js", "dashboard.js", *pages.values(), "index.html"):
        check_file_in(out_dir / page, f"-o {out_dir}: {page}")
    # Both read as package data: plotly's bundle, and the dashboard's own script (harness.dashboard's data).
    for resource in (files("plotly") / "package_data" / "plotly.min.js", files("harness.dashboard") / "dashboard.js"):
        with as_file(resource) as source:
            replace_with(out_dir / source.name, functools.partial(shutil.copyfile, source))
    escaped = _Escaped()  # shared by every page: the cases share their builds and nights
    links = _Links(out_dir)
    profiles = _profiles(store, cases)
    start = 0
    for name, group in by_scenario.items():
        write_atomic(out_dir / pages[name],
                     _scenario_page(name, group, incidents, out_dir, start, findings, escaped, links, profiles,
                                    upstream, others))
        start += len(group)
    index = out_dir / "index.html"
    write_atomic(index, _index(by_scenario, pages, incidents, store.where, profiles, upstream, others, links))
    return index
