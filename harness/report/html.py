"""The HTML report: one self-contained file that works offline.

The verdict comes first, then one section per case with tables, per-trial plots (inline SVG)
and log excerpts. Every piece of text from a run (log lines, reasons, build specs, paths) goes
through ``html.escape``; the page carries no script and a Content-Security-Policy that forbids
scripts and any fetch, so even a missed escape could not run code or reach the network.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from html import escape
from urllib.parse import quote

from harness.compare.verdicts import (
    DEFAULT_METRICS,
    CaseComparison,
    ComparisonReport,
    MetricComparison,
    MetricVerdict,
    RoleResult,
)
from harness.report import _format as f
from harness.report.svg import ROLE_COLORS, Series, trial_plot

__all__ = ["render_html", "phase_table", "baseline_table", "EXCERPT_LIMIT"]

EXCERPT_LIMIT = 20_000
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
_TONE_ICON = {"good": "✔", "bad": "✘", "unsure": "?"}
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:|^//|^\\\\")

_CSS = """
:root { --bad: #b42318; --good: #067647; --unsure: #b54708; --same: #475467; --line: #d0d5dd; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #101828;
       margin: 0 auto; padding: 16px 24px 48px; max-width: 1180px; background: #fff; }
.verdict { border-radius: 10px; padding: 18px 22px; color: #fff; margin: 8px 0 12px; }
.verdict .title { font-size: 28px; font-weight: 700; line-height: 1.2; }
.verdict .detail { font-size: 16px; opacity: .95; margin-top: 4px; }
.tone-bad { background: var(--bad); } .tone-good { background: var(--good); } .tone-unsure { background: var(--unsure); }
.meta { color: #475467; margin: 4px 0 12px; }
.notice { border-left: 4px solid var(--unsure); background: #fffaeb; padding: 8px 12px; margin: 10px 0; }
table { border-collapse: collapse; margin: 8px 0 14px; width: 100%; }
th, td { border: 1px solid var(--line); padding: 5px 8px; text-align: left; vertical-align: top; }
th { background: #f2f4f7; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
code { font: 12.5px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: #f2f4f7;
       padding: 1px 4px; border-radius: 4px; overflow-wrap: anywhere; }
.badge { display: inline-block; border-radius: 999px; padding: 1px 10px; font-weight: 600; font-size: 13px;
         color: #fff; white-space: nowrap; }
.v-better, .o-pass, .held { background: var(--good); } .v-worse, .o-crash, .o-fail, .not-held { background: var(--bad); }
.observation, .not-run { background: var(--unsure, #b8860b); }
.v-same { background: var(--same); } .v-not-enough-data, .o-timeout, .o-infra { background: var(--unsure); }
.sim { color: var(--unsure); font-weight: 600; }
section.case { border-top: 2px solid var(--line); margin-top: 26px; padding-top: 6px; }
h1 { font-size: 20px; margin: 6px 0; } h2 { font-size: 19px; margin: 10px 0 4px; } h3 { font-size: 15px; margin: 16px 0 4px; }
.plots { display: flex; flex-wrap: wrap; gap: 12px; }
svg.plot { border: 1px solid var(--line); border-radius: 6px; background: #fff; }
.plot-title { font-weight: 600; font-size: 13px; fill: #101828; }
.plot-legend, .plot-tick, .plot-axis { font-size: 11px; fill: #344054; }
.plot-empty { font-size: 12px; fill: #667085; }
.plot-area { fill: #fcfcfd; stroke: var(--line); }
.plot-grid { stroke: #eaecf0; }
.plot-line { stroke-width: 1.5; opacity: .45; }
.plot-mean { stroke-width: 1; stroke-dasharray: 5 4; opacity: .8; }
pre { background: #0c111d; color: #f2f4f7; padding: 10px 12px; border-radius: 6px; overflow-x: auto;
      font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; white-space: pre; }
details { margin: 6px 0; } summary { cursor: pointer; font-weight: 600; }
.note { color: #475467; font-size: 13px; }
footer { margin-top: 36px; color: #667085; font-size: 12px; }
"""


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _link(path: str, label: str) -> str:
    """A link to a run folder; anything that is not a plain relative path is shown, not linked."""
    if not path or _SCHEME.match(path):
        return f"<code>{_e(path)}</code>"
    return f'<a href="{_e(quote(path, safe="/._-~"))}">{_e(label)}</a>'


def _badge(text: str, cls: str) -> str:
    return f'<span class="badge {cls}">{_e(text)}</span>'


def _verdict_badge(verdict: MetricVerdict) -> str:
    return _badge(f"{f.VERDICT_SYMBOL[verdict]} {verdict.value}", f"v-{_slug(verdict.value)}")


def _build_cell(role: RoleResult) -> str:
    text = f"<code>{_e(role.build)}</code>"
    if role.what:
        text += f' <span class="sim">{_e(role.what)}</span>'
    if role.attention_backend:
        text += f' · attention backend <code>{_e(role.attention_backend)}</code>'
    if role.profile:
        text += f' · <span class="profile">{_e(role.profile)}</span>'
    return text


def _summary_table(report: ComparisonReport) -> str:
    rows = []
    for i, case in enumerate(report.cases):
        held = _badge("held", "held") if case.expectations_held else _badge("NOT held", "not-held")
        if case.expectations_held and case.not_run:
            held = _badge("not run", "not-run")
        if not case.expectations:
            held = "—"
        rows.append(
            f'<tr><td><a href="#case-{i}">{_e(case.case)}</a></td><td>{_outcome_cell(case)}</td>'
            f"<td>{_glance_badge(case)}</td><td>{held}</td><td>{_e(f.case_metric_summary(case)) or '—'}</td></tr>"
        )
    roles = " → ".join(r.role for r in report.cases[0].roles) if report.cases else ""
    return (
        f"<table><thead><tr><th>Case</th><th>Outcome ({_e(roles)})</th><th>At a glance</th><th>Expectations</th>"
        "<th>Significant changes</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )


def _outcome_cell(case: CaseComparison) -> str:
    """``crash → pass`` as outcome badges, so a fixed crash reads at a glance."""
    return " → ".join(_badge(r.outcome.value, "o-" + r.outcome.value) for r in case.roles) or "—"


def _glance_badge(case: CaseComparison) -> str:
    """The outcome change when there is one (a removed crash is good news, not 'not enough data'), else the
    performance verdict."""
    change = f.case_change(case)
    if change is None:
        return _verdict_badge(case.verdict)
    tone = "held" if change.endswith("removed") else "not-held"
    extra = "" if case.verdict is MetricVerdict.NOT_ENOUGH_DATA else " " + _verdict_badge(case.verdict)
    return _badge(change, tone) + extra


def _role_table(case: CaseComparison) -> str:
    rows = [
        f"<tr><th>{_e(role.role)}</th><td>{_build_cell(role)}</td><td><code>{_e(role.version or '—')}</code></td>"
        f"<td>{_badge(role.outcome.value, 'o-' + role.outcome.value)} {_e(f.fmt_outcomes(role))}</td>"
        f"<td>{('<code>' + _e(role.signature) + '</code>') if role.signature else '—'}</td>"
        f"<td>{_e(role.reason) or '—'}</td></tr>"
        for role in case.roles
    ]
    return (
        "<table><thead><tr><th>Role</th><th>Build</th><th>Version</th><th>Outcomes</th><th>Signature</th>"
        "<th>Reason</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )


_STATE_CLASS = {"held": "held", "NOT HELD": "not-held", "observation": "observation", "not run": "not-run"}


def _expectation_table(case: CaseComparison) -> str:
    if not case.expectations:
        return '<p class="note">The scenario declares no expectations for this case.</p>'
    rows = [
        f"<tr><th>{_e(check.role)}</th><td><code>{_e(check.expected_text)}</code></td>"
        f"<td>{_e(check.actual_text)}</td>"
        f"<td>{_badge(check.state, _STATE_CLASS[check.state])}</td></tr>"
        for check in case.expectations
    ]
    return (
        "<table><thead><tr><th>Role</th><th>Expected</th><th>Got</th><th>Held</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
    )


def baseline_table(case: CaseComparison) -> str:
    """Each role's baseline checks (harness.baselines.role): the key it was judged by and each figure's line
    (baseline, measured, band), or why none was judged. Every text is escaped: a file path or build line is
    the user's."""
    if not case.baselines:
        return ""
    rows = []
    for ref in case.baselines:
        where = (f"<code>{_e(ref.hardware)}</code>, build line <code>{_e(ref.line)}</code>, "
                 f"<code>{_e(ref.path)}</code>")
        if ref.skipped:
            rows.append(f"<tr><th>{_e(ref.role)}</th><td>{where}</td><td>{_e(ref.skipped)}</td>"
                        f"<td>{_badge('not judged', 'not-run')}</td></tr>")
            continue
        for message, held in zip(ref.verdicts, ref.held):
            rows.append(f"<tr><th>{_e(ref.role)}</th><td>{where}</td><td>{_e(message)}</td>"
                        f"<td>{_badge('held', 'held') if held else _badge('NOT HELD', 'not-held')}</td></tr>")
    return ("<h3>Baseline checks</h3><table><thead><tr><th>Role</th><th>Baseline</th><th>Measured against it"
            "</th><th>Held</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _metric_table(case: CaseComparison) -> str:
    if not case.metrics:
        return '<p class="note">Only one role: nothing to compare.</p>'
    rows = []
    notes = []
    for m in case.metrics:
        label = f.metric_label(m.metric)
        if len(case.roles) > 2:
            label += f" ({m.after_role} vs {m.before_role})"
        rows.append(
            f"<tr><th>{_e(label)}</th><td class='num'>{_e(m.before_role)}: {_e(f.fmt_stats(m.before))}</td>"
            f"<td class='num'>{_e(m.after_role)}: {_e(f.fmt_stats(m.after))}</td>"
            f"<td class='num'>{_e(f.fmt_pct(m.delta_rel))}</td><td class='num'>{_e(f.fmt_ci(m))}</td>"
            f"<td class='num'>{_e(f.fmt_p(m.p_value))}</td><td class='num'>±{m.min_effect:.0%}</td>"
            f"<td>{_verdict_badge(m.verdict)}</td></tr>"
        )
        if m.note:
            notes.append(f"<li>{_e(f.metric_label(m.metric, with_unit=False))}: {_e(m.note)}</li>")
    first: MetricComparison = case.metrics[0]
    rule = (
        f"better/worse needs a Mann-Whitney p &lt; {first.alpha:g}, a {first.confidence:.0%} bootstrap CI of "
        "the relative delta that excludes 0, and a delta at least the minimum effect. Only passing trials count, "
        f"and at p &lt; {first.alpha:g} that needs at least {f.trials_needed(first.alpha)} passing trials per side; "
        f"this case had {_e(f.trials_footnote(case))}."
    )
    return (
        "<table><thead><tr><th>Metric</th><th>Baseline mean ± sd</th><th>Candidate mean ± sd</th><th>Δ</th>"
        f"<th>{first.confidence:.0%} CI of Δ</th><th>p</th><th>Min. effect</th><th>Verdict</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
        + (f'<ul class="note">{"".join(notes)}</ul>' if notes else "")
        + f'<p class="note">Verdict rule: {rule}</p>'
    )


def _metric_names(case: CaseComparison) -> list[str]:
    names = list(dict.fromkeys(m.metric for m in case.metrics))
    if not names:
        present = {k for r in case.roles for k in r.metrics}
        names = [spec.name for spec in DEFAULT_METRICS if spec.name in present]
    return names


def _trial_table(case: CaseComparison, names: list[str]) -> str:
    head = "".join(f"<th>{_e(f.metric_label(n))}</th>" for n in names)
    rows = []
    for role in case.roles:
        for i, outcome in enumerate(role.outcomes):
            signature = role.signatures[i] if i < len(role.signatures) else None
            cells = "".join(
                f"<td class='num'>{_e(f.fmt_num(role.metrics[n][i]) if n in role.metrics else '—')}</td>" for n in names
            )
            artifact = role.artifact_dirs[i] if i < len(role.artifact_dirs) else ""
            rows.append(
                f"<tr><td>{_e(role.role)}</td><td class='num'>{i + 1}</td><td>{_badge(outcome, 'o-' + outcome)}</td>"
                f"<td>{('<code>' + _e(signature) + '</code>') if signature else '—'}</td>{cells}"
                f"<td>{_link(artifact, 'run folder') if artifact else '—'}</td></tr>"
            )
    return (
        f"<table><thead><tr><th>Role</th><th>Trial</th><th>Outcome</th><th>Signature</th>{head}"
        "<th>Artifacts</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )


def _plots(case: CaseComparison, names: list[str]) -> str:
    plots = []
    for name in names:
        series = [
            Series(
                label=role.role,
                color=ROLE_COLORS[k % len(ROLE_COLORS)],
                values=role.metrics.get(name, (math.nan,) * role.trials),
                outcomes=role.outcomes,
            )
            for k, role in enumerate(case.roles)
        ]
        plots.append(trial_plot(f"{f.metric_label(name)} per trial", series))
    return f'<div class="plots">{"".join(plots)}</div>' if plots else ""


def _excerpts(case: CaseComparison) -> str:
    blocks = [
        f"<details open><summary>{_e(role.role)}: {_e(role.outcome.value)}"
        f"{(' — ' + _e(role.signature)) if role.signature else ''}</summary>"
        f"<pre>{_e(f.trim_excerpt(role.excerpt, EXCERPT_LIMIT))}</pre></details>"
        for role in case.roles
        if role.excerpt
    ]
    return ("<h3>Log excerpts</h3>" + "".join(blocks)) if blocks else ""


def _series(values: tuple[float | None, ...]) -> str:
    return " → ".join(f.fmt_num(v) for v in values) if any(v is not None for v in values) else "—"


def _phase_table(case: CaseComparison) -> str:
    """A stateful workload's phases: acceptance per phase, by draft position, over time, by cache state."""
    table = phase_table(f.phase_rows(case))
    return ("<h3>Workload phases</h3><p class=\"meta\">One server, no flush between phases; medians over trials.</p>"
            + table) if table else ""


def phase_table(rows: Sequence[f.PhaseRow], first: str = "Role") -> str:
    """The phase rows as an HTML table (the report's and the dashboard's); empty without rows."""
    if not rows:
        return ""
    body = "".join(
        f"<tr><td>{_e(r.role)}</td><td>{_e(r.phase)}</td><td>{_e(f.fmt_num(r.accept_length))}</td>"
        f"<td>{_e(f.fmt_num(r.accept_rate))}</td>"
        f"<td>{_e(f.fmt_num(r.cache_hit_rate))} ({_e(f.fmt_num(r.cache_host_rate))})</td>"
        f"<td>{_e(_series(r.by_position))}</td><td>{_e(_series(r.over_time))}</td>"
        f"<td>{_e(' / '.join(f.fmt_num(v) for _, v in r.by_cache_state))}</td></tr>"
        for r in rows)
    return (f"<table><thead><tr><th>{_e(first)}</th><th>Phase</th><th>Accept length</th><th>Accept rate</th>"
            "<th>Cache hit (host)</th><th>By draft position 1..k</th><th>Over time (quarters)</th>"
            "<th>By cache state (miss / device / host)</th></tr></thead><tbody>" + body + "</tbody></table>")


def _case_section(index: int, case: CaseComparison) -> str:
    names = _metric_names(case)
    held = "" if not case.expectations else (
        _badge("expectations held", "held") if case.expectations_held else _badge("expectations NOT held", "not-held")
    )
    values = f.fmt_case_values(case.values)
    return (
        f'<section class="case" id="case-{index}"><h2>Case <code>{_e(case.case)}</code> '
        f"{_outcome_cell(case)} {_glance_badge(case)} {held}</h2>"
        + (f'<p class="meta">{_e(values)}</p>' if values else "")
        + "<h3>Builds</h3>"
        + _role_table(case)
        + "<h3>Expectations</h3>"
        + _expectation_table(case)
        + baseline_table(case)
        + "<h3>Metrics</h3>"
        + _metric_table(case)
        + _phase_table(case)
        + "<h3>Per-trial results</h3>"
        + _plots(case, names)
        + _trial_table(case, names)
        + _excerpts(case)
        + "</section>"
    )


def render_html(report: ComparisonReport) -> str:
    """The whole report as one HTML document with no external resources."""
    head = f.headline(report)
    notices = ""
    if report.uses_reference_server:
        notices += f'<p class="notice"><strong>Note:</strong> {_e(f.REFERENCE_NOTICE)}</p>'
    if report.uses_cpu_build:
        notices += f'<p class="notice"><strong>Note:</strong> {_e(f.CPU_BUILD_NOTICE)}</p>'
    notices += "".join(f'<p class="notice">{_e(note)}</p>'
                       for note in f.grouped_notes(report.notes, [c.case for c in report.cases]))
    body = (
        f'<header class="verdict tone-{head.tone}"><div class="title">{_TONE_ICON[head.tone]} {_e(head.title)}</div>'
        f'<div class="detail">{_e(head.detail)}</div></header>'
        f"<h1>sglang-repro compare: {_e(report.scenario)}</h1>"
        f'<p class="meta">scenario <code>{_e(report.file)}</code> · report <code>{_e(report.id)}</code> · '
        f"harness {_e(report.harness_version)} · {_e(report.created_at)}</p>"
        + notices
        + _summary_table(report)
        + "".join(_case_section(i, c) for i, c in enumerate(report.cases))
        + f"<footer>Generated by sglang-repro {_e(report.harness_version)}. Machine-readable data: "
        f'<a href="report.json">report.json</a>.</footer>'
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(head.title)} — {_e(report.scenario)}</title>"
        f"<style>{_CSS}</style></head>\n<body>{body}</body></html>\n"
    )
