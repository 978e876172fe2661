"""Wording and number formats shared by the Markdown and HTML reports, so both say the same."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.build.labels import CPU_BUILD_NOTICE, REFERENCE_NOTICE
from harness.compare.verdicts import (
    CaseComparison,
    ComparisonReport,
    MetricComparison,
    MetricVerdict,
    RoleResult,
)
from harness.measure.statistics import summarize
from harness.records.metric_definitions import (
    ACCEPT_LENGTH,
    ACCEPT_RATE,
    CACHE_HIT_RATE,
    PHASE_SEPARATOR,
    figure,
    measured_positions,
    position_metric,
)
from harness.records.outcome import BROKEN, Outcome

__all__ = [
    "Headline",
    "headline",
    "metric_label",
    "fmt_num",
    "fmt_pct",
    "fmt_ci",
    "fmt_p",
    "fmt_stats",
    "fmt_outcomes",
    "fmt_case_values",
    "trim_excerpt",
    "REFERENCE_NOTICE",
    "CPU_BUILD_NOTICE",
    "VERDICT_SYMBOL",
    "case_metric_summary",
    "PhaseRow",
    "phase_rows",
    "phase_rows_of",
    "outcome_change",
    "case_change",
    "case_glance",
    "metric_line",
    "grouped_notes",
    "trials_footnote",
    "trials_needed",
]


VERDICT_SYMBOL = {MetricVerdict.BETTER: "▲", MetricVerdict.SAME: "=", MetricVerdict.WORSE: "▼",
                  MetricVerdict.NOT_ENOUGH_DATA: "?"}


def metric_label(name: str, *, with_unit: bool = True) -> str:
    """The registry's label (and unit) of a stored metric name; a per-phase figure (NAME@PHASE) says its phase;
    a name the registry does not know is shown as it is."""
    base, _, phase = name.partition(PHASE_SEPARATOR)
    entry = figure(name)
    label, unit = (entry.label, entry.unit) if entry is not None else (base, "")
    if phase:
        label = f"{label}, phase {phase}"
    return f"{label} ({unit})" if with_unit and unit else label


@dataclass(frozen=True)
class PhaseRow:
    """One role's figures in one workload phase (medians over the trials that ran it), for the phase table."""

    role: str
    phase: str
    accept_length: float | None
    accept_rate: float | None
    cache_hit_rate: float | None
    cache_host_rate: float | None
    by_position: tuple[float | None, ...]  # draft position 1, 2, ...
    over_time: tuple[float | None, ...]  # the phase's quarters, in order
    by_cache_state: tuple[tuple[str, float | None], ...]  # miss / device / host


def _median(samples: Sequence[float]) -> float | None:
    values = sorted(v for v in samples if math.isfinite(v))
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def phase_rows_of(role: str, metrics: Mapping[str, Sequence[float]]) -> list[PhaseRow]:
    """One role's (or one night's) rows of the phase table, from its per-trial values of NAME@PHASE figures."""
    rows = []
    phases = list(dict.fromkeys(name.partition(PHASE_SEPARATOR)[2] for name in metrics if PHASE_SEPARATOR in name))
    for phase in phases:
        def get(name: str, phase: str = phase) -> float | None:
            return _median(metrics.get(f"{name}@{phase}", ()))
        positions = [get(position_metric(k)) for k in range(1, measured_positions(metrics, phase) + 1)]
        rows.append(PhaseRow(
            role=role, phase=phase, accept_length=get(ACCEPT_LENGTH.name), accept_rate=get(ACCEPT_RATE.name),
            cache_hit_rate=get(CACHE_HIT_RATE.name), cache_host_rate=get("cache_host_rate"),
            by_position=tuple(positions), over_time=tuple(get(f"accept_length_q{q}") for q in range(1, 5)),
            by_cache_state=tuple((s, get(f"accept_length_{s}")) for s in ("miss", "device", "host"))))
    return rows


def phase_rows(case: CaseComparison) -> list[PhaseRow]:
    """Acceptance per workload phase, by draft position, over time and by cache state, for every role."""
    return [row for role in case.roles for row in phase_rows_of(role.role, role.metrics)]


def fmt_num(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def fmt_pct(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    return f"{value * 100:+.1f}%".replace("-", "−")


def fmt_ci(m: MetricComparison) -> str:
    if not (math.isfinite(m.ci_low) and math.isfinite(m.ci_high)):
        return "—"
    return f"[{fmt_pct(m.ci_low)}, {fmt_pct(m.ci_high)}]"


def fmt_p(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    if value < 1e-4:
        return "<0.0001"
    return f"{value:.2g}"


def fmt_stats(samples: tuple[float, ...]) -> str:
    finite = [v for v in samples if math.isfinite(v)]
    if not finite:
        return "—"
    s = summarize(finite)
    return f"{fmt_num(s.mean)} ± {fmt_num(s.stdev)} (n={s.n})"


def fmt_outcomes(role: RoleResult) -> str:
    """``crash ×5`` or ``pass ×3, crash ×2``, in order of first appearance."""
    if not role.outcomes:
        return "no trials"
    return ", ".join(f"{outcome} ×{count}" for outcome, count in role.outcome_counts.items())


def fmt_case_values(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())


def trim_excerpt(text: str, limit: int) -> str:
    """Keep the start and, mostly, the end of a log excerpt: tracebacks end with the message."""
    text = text.rstrip("\n")
    if len(text) <= limit:
        return text
    head = limit // 3
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n… {cut} characters cut …\n{text[-tail:]}"


@dataclass(frozen=True)
class Headline:
    """The first thing a reader sees: do the expectations hold, and what the numbers say."""

    title: str
    detail: str
    tone: str  # "good" | "bad" | "unsure": the colour of the banner


def headline(report: ComparisonReport) -> Headline:
    checks = [e for c in report.cases for e in c.expectations]
    failed = [e for e in checks if e.failed]
    not_run = [e for e in checks if e.not_run]
    observed = [e for e in checks if e.observation]
    if not checks:
        expect = "No expectations declared"
    elif failed:
        expect = f"{len(failed)} of {len(checks)} expectations did NOT hold"
    elif not_run:
        expect = f"{len(not_run)} of {len(checks)} expectations could not be checked (not run: {not_run[0].not_run})"
    else:
        confirmed = " confirmed" if observed else ""
        expect = f"All {len(checks) - len(observed)}{confirmed} expectations held"
    if observed:
        expect += f"; {len(observed)} hypothesis(es) not confirmed"
    if report.partial:
        expect = f"PARTIAL ({report.partial}) · {expect}"
    verdict = report.verdict
    counts: dict[str, int] = {}
    for case in report.cases:  # a removed crash is counted as that, not as "not enough data"
        key = case_change(case) if case.verdict is MetricVerdict.NOT_ENOUGH_DATA and case_change(case) else case.verdict
        counts[str(key)] = counts.get(str(key), 0) + 1
    spread = ", ".join(f"{n} {v}" for v, n in counts.items())
    title = f"{expect} · performance: {verdict}"
    detail = f"{len(report.cases)} case{'s' if len(report.cases) != 1 else ''}: {spread}" if report.cases else "no cases"
    if failed or verdict is MetricVerdict.WORSE:
        tone = "bad"
    elif report.partial or (verdict is MetricVerdict.NOT_ENOUGH_DATA and not checks):
        tone = "unsure"  # a PARTIAL report never wears a check mark: what did not run was not judged
    else:
        tone = "good"
    return Headline(title, detail, tone)


def case_metric_summary(case: CaseComparison) -> str:
    """``Output throughput −48.9% (p=0.0079)`` for each metric whose verdict is not ``same``."""
    parts = [
        f"{metric_label(m.metric, with_unit=False)} {fmt_pct(m.delta_rel)} (p={fmt_p(m.p_value)})"
        for m in case.metrics
        if m.verdict in (MetricVerdict.BETTER, MetricVerdict.WORSE)
    ]
    return "; ".join(parts)


# --- at a glance: did the builds change what a case does? ---------------------------------------------------------

def _broke(outcome: Outcome) -> str:
    """The noun of a broken outcome: ``failure removed``, not ``fail removed``."""
    return "failure" if outcome is Outcome.FAIL else outcome.value


def outcome_change(case: CaseComparison, arrow: str = "->") -> str:
    """The roles' outcomes in order, ``crash -> pass`` (a role's outcome is its worst trial's)."""
    return f" {arrow} ".join(role.outcome.value for role in case.roles) or "—"


def case_change(case: CaseComparison) -> str | None:
    """``crash removed`` when the first role broke and the last passed every trial (``failure removed``,
    ``timeout removed``), ``... introduced`` the other way round; None when the outcome did not change."""
    if len(case.roles) < 2:
        return None
    first, last = case.roles[0].outcome, case.roles[-1].outcome
    if first in BROKEN and last is Outcome.PASS:
        return f"{_broke(first)} removed"
    if first is Outcome.PASS and last in BROKEN:
        return f"{_broke(last)} introduced"
    return None


def case_glance(case: CaseComparison) -> str:
    """What a reader wants first about a case: the outcome change if there is one, else the metric verdict.
    A fixed crash has no passing trials on one side, so its metrics are 'not enough data': that is not news."""
    change = case_change(case)
    if change and case.verdict is MetricVerdict.NOT_ENOUGH_DATA:
        return change
    return f"{change}; performance {case.verdict}" if change else f"performance {case.verdict}"


def metric_line(m: MetricComparison) -> str:
    """``accept length same (+0.4%, 95% CI [−1.9%, +2.6%], p=0.69)``: a verdict always with its interval."""
    if m.verdict is MetricVerdict.NOT_ENOUGH_DATA:
        return f"{metric_label(m.metric, with_unit=False)} not enough data"
    return (f"{metric_label(m.metric, with_unit=False)} {m.verdict} ({fmt_pct(m.delta_rel)}, "
            f"{m.confidence:.0%} CI {fmt_ci(m)}, p={fmt_p(m.p_value)})")


def grouped_notes(notes: Sequence[str], cases: Sequence[str]) -> list[str]:
    """Notes that differ only by the case they start with, stated once with the cases they apply to
    (12 identical ``CASE: acceptance measured with ignore_eos ...`` notices become one)."""
    by_text: dict[str, list[str]] = {}
    for note in notes:
        case = next((c for c in sorted(cases, key=len, reverse=True) if note.startswith(f"{c}: ")), None)
        text = note[len(case) + 2:] if case else note
        by_text.setdefault(text, []).append(case or "")
    out = []
    for text, named in by_text.items():
        named = [c for c in named if c]
        if not named:
            out.append(text)
        elif len(named) == len(cases) and len(cases) > 1:
            out.append(f"every case: {text}")
        elif len(named) == 1:
            out.append(f"{named[0]}: {text}")
        else:
            out.append(f"{len(named)} cases ({', '.join(named)}): {text}")
    return out


def trials_footnote(case: CaseComparison) -> str:
    """The trials the rule had, from the data: ``before 5 trials (0 passing), after 5 trials (5 passing)``."""
    parts = []
    for role in case.roles:
        passing = sum(1 for o in role.outcomes if o is Outcome.PASS)
        parts.append(f"{role.role} {role.trials} trial{'s' if role.trials != 1 else ''} ({passing} passing)")
    return ", ".join(parts)


def trials_needed(alpha: float) -> int:
    """The fewest passing trials per side with which the rank test can reach ``alpha`` at all."""
    from harness.measure.statistics import min_p_value

    n = 1
    while min_p_value(n, n) >= alpha and n < 1000:
        n += 1
    return n
