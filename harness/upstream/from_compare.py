"""A comparison's report (``reports/compare/<id>/report.json``) as a finding.

What it picked, unless ``--case``/``--role`` say: the first case where the later role crashed and the earlier did
not (a crash that appeared), else the first metric that got worse, else the first role that crashed at all. The
representative run is that role's first crashed trial (for a metric: its first trial with a value).
"""

from __future__ import annotations

from pathlib import Path

from harness.compare.verdicts import CaseComparison, ComparisonReport, MetricComparison, MetricVerdict, RoleResult
from harness.records.outcome import MEASURED, Outcome
from harness.upstream.finding import Chart, ChartGroup, Finding
from harness.upstream.from_run import kind_of, read_run, scenario_path
from harness.upstream.levels import metric_change
from harness.util.errors import UserError

__all__ = ["finding_from_compare"]


def _load(path: Path) -> tuple[ComparisonReport, Path]:
    from harness.report.json import load_report

    file = path / "report.json" if path.is_dir() else path
    return load_report(file), file.parent


def _run_dir(named: str, folder: Path) -> Path:
    """A trial's artifact folder: where the report says, else under the comparison's own ``runs/``."""
    for candidate in (Path(named), folder / "runs" / Path(named).name):
        if (candidate / "result.json").is_file():
            return candidate
    raise UserError(f"{folder}: the run folder {named} is gone (no result.json there or under runs/)")


def _crashed(role: RoleResult) -> int | None:
    return next((i for i, o in enumerate(role.outcomes) if o == Outcome.CRASH), None)


def _pick(report: ComparisonReport, case: str | None, role: str | None
          ) -> tuple[CaseComparison, RoleResult, MetricComparison | None]:
    cases = [c for c in report.cases if case is None or c.case == case]
    if not cases:
        raise UserError(f"--case {case}: no such case in the comparison (cases: {', '.join(c.case for c in report.cases)})")
    for c in cases:
        roles = [r for r in c.roles if role is None or r.role == role]
        if not roles and role is not None:
            raise UserError(f"--role {role}: no such role in case {c.case} (roles: {', '.join(r.role for r in c.roles)})")
        later = roles[-1]
        if _crashed(later) is not None and (len(c.roles) < 2 or _crashed(c.roles[0]) is None or role is not None):
            return c, later, None
        worse = next((m for m in c.metrics if m.verdict == MetricVerdict.WORSE
                      and (role is None or m.after_role == role)), None)
        if worse is not None:
            return c, c.role(worse.after_role), worse
    for c in cases:
        hit = next((r for r in c.roles if (role is None or r.role == role) and _crashed(r) is not None), None)
        if hit is not None:
            return c, hit, None
    raise UserError(f"{report.id}: no crash and no metric that got worse"
                    + (f" in case {case}" if case else "") + (f" for role {role}" if role else "")
                    + ": nothing to report upstream")


def finding_from_compare(path: Path, *, case: str | None = None, role: str | None = None) -> Finding:
    report, folder = _load(path)
    chosen, who, worse = _pick(report, case, role)
    line = (f"comparison {report.id}, case {chosen.case}: "
            + ", ".join(f"{r.role} ({r.build}) {r.outcome.value}" for r in chosen.roles))
    if worse is None:
        index = _crashed(who)
        assert index is not None
        run_dir = _run_dir(who.artifact_dirs[index], folder)
        record = read_run(run_dir)
        crashes = sum(1 for o in who.outcomes if o == Outcome.CRASH)
        # Since and last good only where the crash appeared: a role before this one that did not crash
        earlier = [r for r in chosen.roles[:chosen.roles.index(who)] if _crashed(r) is None]
        return Finding(source="compare", source_ref=str(path), kind=kind_of(record, str(run_dir)), record=record,
                       run_dir=run_dir, scenario_file=scenario_path(record, folder),
                       how_often=f"{crashes} of {who.trials} trials on {who.build}",
                       since=f"{who.build} (role {who.role})" if earlier else None,
                       last_good=earlier[0].build if earlier else None, context=(line,))
    return _metric_finding(path, folder, chosen, who, worse, line)


def _metric_finding(path: Path, folder: Path, chosen: CaseComparison, who: RoleResult, worse: MetricComparison,
                    line: str) -> Finding:
    index = next((i for i, o in enumerate(who.outcomes) if o in MEASURED), 0)
    run_dir = _run_dir(who.artifact_dirs[index], folder)
    record = read_run(run_dir)
    before_role = chosen.role(worse.before_role)
    groups = (ChartGroup(f"{worse.before_role}: {before_role.build}", worse.before, False),
              ChartGroup(f"{worse.after_role}: {who.build}", worse.after, True))
    rests = (f"{len(worse.before)} trials of {worse.before_role}, {len(worse.after)} of {worse.after_role}; change "
             f"{worse.delta_rel:+.1%}, 95% CI [{worse.ci_low:+.1%}, {worse.ci_high:+.1%}], p={worse.p_value:.2g}")
    change = metric_change(worse.metric, groups[:1], groups[1:], rests)
    chart = Chart(f"{change.label} per trial, case {chosen.case}", change.unit or change.label, groups)
    return Finding(source="compare", source_ref=str(path), kind="regression", record=record, run_dir=run_dir,
                   scenario_file=scenario_path(record, folder), how_often=f"{len(worse.after)} of {len(worse.after)} "
                   f"trials of {who.build} against {len(worse.before)} of {before_role.build}",
                   since=f"{who.build} (role {who.role})", last_good=before_role.build, metric=change, chart=chart,
                   context=(line,))
