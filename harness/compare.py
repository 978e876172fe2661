"""Comparing builds: every case under each role, trials interleaved, expectations and statistics.

Trials run A B A B ... (trial 0 of every role, then trial 1, ...) so that drift of the machine
during the comparison hits every build alike; trial t of every role gets the same seeded prompts.
The numbers are judged by :mod:`harness.comparison`; the reports are written by :mod:`harness.report`.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.comparison import (
    DEFAULT_METRICS,
    CaseComparison,
    ComparisonReport,
    ExpectationCheck,
    MetricSpec,
    RoleResult,
    build_report,
    compare_case,
)
from harness.errors import UserError
from harness.expectation import run_holds
from harness.outcome import Outcome
from harness.legacy_outcome import RunResult
from harness.paths import reports_root
from harness.report import write_reports
from harness.run import RunOptions, execute_run
from harness.scenario import Case, LoadedScenario
from harness.scenario.model import Expectation, RelativeChecks

__all__ = ["CompareOutcome", "compare_cases", "role_specs"]

log = logging.getLogger(__name__)

_RELATIVE = {"accept_length": "accept_length_max_regression",
             "output_throughput_tok_s": "output_throughput_max_regression"}


@dataclass(frozen=True)
class CompareOutcome:
    report: ComparisonReport
    paths: dict[str, Path]
    runs: tuple[RunResult, ...]

    @property
    def exit_code(self) -> int:
        """design.md: 0 every expectation held, 1 one did not, 3 infra (a run that never tried)."""
        if self.report.all_expectations_held:
            return 0
        unexpected_infra = any(
            not check.held and check.actual_outcome == "infra" for case in self.report.cases
            for check in case.expectations
        )
        return 3 if unexpected_infra else 1


def role_specs(loaded: LoadedScenario, *, overrides: Mapping[str, str], reference: bool) -> dict[str, str]:
    """Build spec per role, baseline first: the relative checks' baseline, else ``before``, else the first
    role of the file; then ``after``; then the rest in file order."""
    roles = loaded.scenario.builds
    unknown = set(overrides) - set(roles)
    if unknown:
        raise UserError(f"no build role {sorted(unknown)[0]!r} in {loaded.file} (roles: {', '.join(roles)})")
    rel = loaded.scenario.checks.relative
    first = [r for r in (rel.baseline if rel else None, "before", "after") if r in roles]
    order = list(dict.fromkeys([*first, *roles]))
    return {role: overrides.get(role) or (roles[role].sim_spec if reference else roles[role].spec) for role in order}


def _expectation_check(role: str, exp: Expectation, runs: Sequence[RunResult], summary: RoleResult) -> ExpectationCheck:
    matching = sum(1 for r in runs if run_holds(exp, Outcome(r.outcome), r.signature, None))
    return ExpectationCheck(
        role=role,
        expected_outcome="|".join(exp.outcomes),
        expected_signature="|".join(exp.signatures) or None,
        actual_outcome=summary.outcome,
        actual_signature=summary.signature,
        held=bool(runs) and matching == len(runs),
        trials_matching=matching,
        trials=len(runs),
    )


def _relative_checks(rel: RelativeChecks | None, case: CaseComparison) -> list[ExpectationCheck]:
    """checks.relative: a later role may not be significantly worse than the baseline beyond the tolerance."""
    if rel is None:
        return []
    out = []
    for metric in case.metrics:
        tolerance = getattr(rel, _RELATIVE.get(metric.metric, ""), None)
        if tolerance is None or metric.before_role != rel.baseline:
            continue
        worse = metric.verdict == "worse" and metric.delta_rel < -tolerance
        out.append(ExpectationCheck(
            role=metric.after_role,
            expected_outcome=f"{metric.metric} not worse than {rel.baseline} by > {tolerance:.0%}",
            expected_signature=None,
            actual_outcome=(f"{metric.delta_rel:+.1%} ({metric.verdict})" if metric.delta_rel == metric.delta_rel
                            else metric.verdict),
            actual_signature=None,
            held=not worse,
            trials_matching=0,
            trials=len(metric.after),
        ))
    return out


def _role_result(role: str, spec: str, runs: Sequence[RunResult], report_dir: Path) -> RoleResult:
    metric_names = {m.name for m in DEFAULT_METRICS} | {"accept_length_server", "ttft_ms_p50", "itl_ms_p50",
                                                         "request_throughput_rps"}
    # A trial that did not pass has no meaningful speed (a crash "measures" 0 tok/s): leave it blank.
    metrics = {
        name: tuple(float(v) if isinstance(v, (int, float)) and r.outcome == "pass" else float("nan")
                    for r, v in ((r, r.metrics.get(name)) for r in runs))
        for name in sorted(metric_names)
    }
    first = runs[0]
    excerpt = next((r.excerpt for r in runs if r.excerpt), "")
    return RoleResult(
        role=role,
        build=spec,
        build_kind=first.build["kind"],
        version=str(first.build.get("version") or ""),
        outcomes=tuple(r.outcome for r in runs),
        signatures=tuple(r.signature for r in runs),
        reasons=tuple(r.reason for r in runs),
        metrics=metrics,
        artifact_dirs=tuple(str(Path(r.artifacts).resolve().relative_to(report_dir.resolve())) for r in runs),
        excerpt=excerpt,
    )


def compare_cases(
    loaded: LoadedScenario,
    cases: Sequence[Case],
    specs: Mapping[str, str],
    *,
    trials: int | None = None,
    out_root: Path | None = None,
    progress: Callable[[RunResult], None] | None = None,
) -> CompareOutcome:
    """Run every case under every role (interleaved trials) and write the reports."""
    report_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{loaded.scenario.name[:40]}-{secrets.token_hex(2)}"
    report_dir = (out_root or reports_root()) / "compare" / report_id
    report_dir.mkdir(parents=True)
    options = RunOptions(out_root=report_dir, progress=False)
    all_runs: list[RunResult] = []
    compared = []
    notes = ["roles: " + ", ".join(f"{role} = {spec}" for role, spec in specs.items())]
    for case in cases:
        n = trials or case.scenario.workload.trials
        by_role: dict[str, list[RunResult]] = {role: [] for role in specs}
        for trial in range(n):
            for role, spec in specs.items():
                result = execute_run(case, spec, role=role, trial=trial, options=options)
                by_role[role].append(result)
                all_runs.append(result)
                if progress:
                    progress(result)
        roles = [_role_result(role, specs[role], runs, report_dir) for role, runs in by_role.items()]
        tolerances = case.scenario.checks.relative
        metric_specs = [
            MetricSpec(m.name, m.label, m.unit, m.higher_is_better,
                       getattr(tolerances, _RELATIVE[m.name], None) or m.min_effect)
            if tolerances is not None and m.name in _RELATIVE else m
            for m in DEFAULT_METRICS
        ]
        base = compare_case(case.name, case.values, roles, metrics=metric_specs)
        checks = [_expectation_check(role, case.scenario.expect[role], by_role[role], r)
                  for role, r in zip(specs, roles) if role in case.scenario.expect]
        checks += _relative_checks(tolerances, base)
        compared.append(CaseComparison(case=base.case, values=base.values, roles=base.roles,
                                       expectations=tuple(checks), metrics=base.metrics, verdict=base.verdict))
    report = build_report(report_id, loaded.scenario.name, str(loaded.file), compared, notes=notes)
    paths = write_reports(report, report_dir)
    return CompareOutcome(report=report, paths=paths, runs=tuple(all_runs))
