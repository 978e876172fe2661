"""The Markdown report: compact tables that fit a GitHub comment and ``$GITHUB_STEP_SUMMARY``.

GitHub rejects comments over 65,536 characters. The renderer tries full excerpts first, then
shorter ones, then none, and cuts the text as a last resort, always saying what it left out.
"""

from __future__ import annotations

import re

from harness.compare.verdicts import CaseComparison, ComparisonReport, RoleResult
from harness.records.outcome import Outcome
from harness.report import _format as f

__all__ = ["render_markdown", "MAX_CHARS"]

MAX_CHARS = 60_000  # below GitHub's 65,536-character comment limit, with room for a wrapper
_EXCERPT_LIMITS = (3000, 800, 0)
_TONE_ICON = {"good": "✅", "bad": "❌", "unsure": "⚠️"}


def _cell(text: str) -> str:
    """Text safe inside a table cell: no pipes, no line breaks, no raw HTML."""
    text = text.replace("\r", " ").replace("\n", " ")
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|")


def _code(text: str) -> str:
    """Inline code span that survives backticks and pipes in ``text``."""
    text = text.replace("\n", " ").replace("|", "\\|")
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`{3,}", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _build_cell(role: RoleResult) -> str:
    text = _code(role.build)
    if role.what:
        text += f" — *{_cell(role.what)}*"
    if role.attention_backend:
        text += f" · attention backend {_code(role.attention_backend)}"
    if role.profile:
        text += f" · {_cell(role.profile)}"
    return text


def _role_table(case: CaseComparison) -> list[str]:
    lines = [
        "| Role | Build | Version | Outcomes | Signature |",
        "| --- | --- | --- | --- | --- |",
    ]
    for role in case.roles:
        lines.append(
            f"| **{_cell(role.role)}** | {_build_cell(role)} | {_cell(role.version) or '—'} | "
            f"{_cell(f.fmt_outcomes(role))} | {_code(role.signature) if role.signature else '—'} |"
        )
    return lines


_STATE_MARK = {"held": "✅", "NOT HELD": "❌ **no**", "observation": "🔍 hypothesis not confirmed",
               "not run": "⏸ not run"}


def _expectation_table(case: CaseComparison) -> list[str]:
    if not case.expectations:
        return []
    lines = ["| Role | Expected | Got | Held |", "| --- | --- | --- | --- |"]
    for check in case.expectations:
        lines.append(
            f"| **{_cell(check.role)}** | {_cell(check.expected_text)} | {_cell(check.actual_text)} | "
            f"{_STATE_MARK[check.state]} |"
        )
    return lines


def _baseline_table(case: CaseComparison) -> list[str]:
    """Each role's baseline checks: one row per figure (baseline, measured, band), or why none was judged."""
    if not case.baselines:
        return []
    lines = ["| Role | Baseline | Measured against it | Held |", "| --- | --- | --- | --- |"]
    for ref in case.baselines:
        where = f"{_code(ref.hardware)}, {_code(ref.line)}"
        if ref.skipped:
            lines.append(f"| **{_cell(ref.role)}** | {where} | {_cell(ref.skipped)} | {_STATE_MARK['not run']} |")
        for message, held in zip(ref.verdicts, ref.held):
            lines.append(f"| **{_cell(ref.role)}** | {where} | {_cell(message)} | "
                         f"{_STATE_MARK['held' if held else 'NOT HELD']} |")
    return lines


def _metric_table(case: CaseComparison) -> list[str]:
    if not case.metrics:
        return []
    lines = [
        "| Metric | Baseline (mean ± sd) | Candidate (mean ± sd) | Δ | 95% CI | p (Mann-Whitney) | Verdict |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    notes = []
    for m in case.metrics:
        label = f.metric_label(m.metric)
        if len(case.roles) > 2:
            label += f" ({m.after_role} vs {m.before_role})"
        lines.append(
            "| "
            + " | ".join(
                [
                    _cell(label),
                    f"{_cell(m.before_role)}: {f.fmt_stats(m.before)}",
                    f"{_cell(m.after_role)}: {f.fmt_stats(m.after)}",
                    f.fmt_pct(m.delta_rel),
                    f.fmt_ci(m),
                    f.fmt_p(m.p_value),
                    f"{f.VERDICT_SYMBOL[m.verdict]} **{m.verdict}**",
                ]
            )
            + " |"
        )
        if m.note:
            notes.append(f"- {_cell(f.metric_label(m.metric, with_unit=False))}: {_cell(m.note)}")
    return [*lines, *([""] if notes else []), *notes]


def _series(values: tuple[float | None, ...]) -> str:
    return " → ".join(f.fmt_num(v) for v in values) if any(v is not None for v in values) else "—"


def _phase_table(case: CaseComparison) -> list[str]:
    """A stateful workload's phases: acceptance per phase, by draft position, over time, by cache state."""
    rows = f.phase_rows(case)
    if not rows:
        return []
    lines = ["Workload phases (one server, no flush between them; medians over trials):", "",
             "| Role | Phase | Accept length | Accept rate | Cache hit (host) | By draft position 1..k | "
             "Over time (quarters) | By cache state (miss / device / host) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        states = " / ".join(f.fmt_num(v) for _, v in r.by_cache_state)
        lines.append(f"| {_cell(r.role)} | {_cell(r.phase)} | {f.fmt_num(r.accept_length)} | {f.fmt_num(r.accept_rate)} "
                     f"| {f.fmt_num(r.cache_hit_rate)} ({f.fmt_num(r.cache_host_rate)}) | {_series(r.by_position)} "
                     f"| {_series(r.over_time)} | {states} |")
    return lines


def _rule(report: ComparisonReport) -> list[str]:
    metrics = [m for c in report.cases for m in c.metrics]
    if not metrics:
        return []
    effects = {m.metric: m.min_effect for m in metrics}
    rule = (
        f"Verdict rule: better/worse needs a Mann-Whitney p < {metrics[0].alpha:g}, a {metrics[0].confidence:.0%} "
        "bootstrap CI of the relative delta that excludes 0, and a delta of at least the minimum effect ("
        + ", ".join(f"{f.metric_label(name, with_unit=False)} {effect:.0%}" for name, effect in effects.items())
        + f"). Only passing trials count; at p < {metrics[0].alpha:g} that needs at least "
        f"{f.trials_needed(metrics[0].alpha)} passing trials per side. Trials here: "
        + "; ".join(f"{c.case}: {f.trials_footnote(c)}" for c in report.cases) + "."
    )
    return ["", f"<sub>{_cell(rule)}</sub>"]


def _summary(report: ComparisonReport) -> list[str]:
    """One row per case: the outcome before -> after and what changed, before the detail."""
    if not report.cases:
        return []
    roles = " → ".join(r.role for r in report.cases[0].roles)
    lines = [f"| Case | Outcome ({_cell(roles)}) | At a glance | Expectations |", "| --- | --- | --- | --- |"]
    for case in report.cases:
        held = "held" if case.expectations_held else "**NOT held**"
        if case.expectations_held and case.not_run:
            held = "not run"
        lines.append(f"| {_code(case.case)} | {_cell(f.outcome_change(case, '→'))} | {_cell(f.case_glance(case))} | "
                     f"{held if case.expectations else '—'} |")
    return lines


def _details(case: CaseComparison, excerpt_limit: int, with_artifacts: bool) -> list[str]:
    lines: list[str] = []
    for role in case.roles:
        if role.reason and role.outcome is not Outcome.PASS:
            lines.append(f"- **{_cell(role.role)}**: {_cell(role.reason)}")
    if with_artifacts:
        for role in case.roles:
            links = [
                f"[trial {i + 1}](<{path.replace('>', '%3E')}>)" for i, path in enumerate(role.artifact_dirs) if path
            ]
            if links:
                lines.append(f"- Artifacts of **{_cell(role.role)}**: " + ", ".join(links))
    for role in case.roles:
        if role.excerpt and excerpt_limit > 0:
            lines += [
                "",
                f"<details><summary>Log excerpt: {_cell(role.role)} ({_cell(role.outcome.value)})</summary>",
                "",
                _fence(f.trim_excerpt(role.excerpt, excerpt_limit)),
                "",
                "</details>",
            ]
    return lines


def _render(report: ComparisonReport, excerpt_limit: int, with_artifacts: bool) -> str:
    head = f.headline(report)
    lines = [
        f"## sglang-repro compare: {_cell(report.scenario)}",
        "",
        f"### {_TONE_ICON[head.tone]} {_cell(head.title)}",
        "",
        f"{_cell(head.detail)} · scenario {_code(report.file)} · report {_code(report.id)} · "
        f"harness {_cell(report.harness_version)} · {_cell(report.created_at)}",
    ]
    if report.uses_reference_server:
        lines += ["", f"> **Note:** {_cell(f.REFERENCE_NOTICE)}"]
    if report.uses_cpu_build:
        lines += ["", f"> **Note:** {_cell(f.CPU_BUILD_NOTICE)}"]
    for note in f.grouped_notes(report.notes, [c.case for c in report.cases]):
        lines += ["", f"> {_cell(note)}"]
    lines += ["", *_summary(report)]
    for case in report.cases:
        values = f.fmt_case_values(case.values)
        title = f"#### Case {_code(case.case)}" + (f" ({_cell(values)})" if values else "")
        summary = f.case_metric_summary(case)
        held = "expectations held" if case.expectations_held else "**expectations NOT held**"
        lines += [
            "",
            title,
            "",
            f"{_cell(f.outcome_change(case, '→'))} · **{_cell(f.case_glance(case))}** · {held}"
            + (f" · {_cell(summary)}" if summary else ""),
            "",
            *_role_table(case),
        ]
        expectation_lines = _expectation_table(case)
        if expectation_lines:
            lines += ["", *expectation_lines]
        baseline_lines = _baseline_table(case)
        if baseline_lines:
            lines += ["", *baseline_lines]
        metric_lines = _metric_table(case)
        if metric_lines:
            lines += ["", *metric_lines]
        phase_lines = _phase_table(case)
        if phase_lines:
            lines += ["", *phase_lines]
        details = _details(case, excerpt_limit, with_artifacts)
        if details:
            lines += ["", *details]
    lines += _rule(report)
    if excerpt_limit == 0 and any(r.excerpt for c in report.cases for r in c.roles):
        lines += ["", "_Log excerpts left out to fit a GitHub comment; see report.html._"]
    return "\n".join(lines) + "\n"


def render_markdown(report: ComparisonReport, *, max_chars: int = MAX_CHARS) -> str:
    """The report as GitHub-flavoured Markdown of at most ``max_chars`` characters."""
    text = ""
    for with_artifacts in (True, False):
        for limit in _EXCERPT_LIMITS:
            text = _render(report, limit, with_artifacts)
            if len(text) <= max_chars:
                return text
    marker = "\n\n_… report cut to fit a GitHub comment; see report.html and report.json._\n"
    return text[: max_chars - len(marker)] + marker
