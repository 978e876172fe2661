"""Running a comparison: every case under each build role, trials interleaved; returns data.

Trials run A B A B ... (trial 0 of every role, then trial 1, ...) so that drift of the machine
during the comparison hits every build alike; trial t of every role gets the same seeded prompts.
Expectations are judged by :mod:`harness.expectations.judge`, numbers by :mod:`harness.compare.verdicts`; the
command writes the reports (:mod:`harness.report`), as asv keeps publishing apart from running.
An interrupted comparison returns what it finished, marked partial.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.baselines.role import judge_role_baselines
from harness.build import Builds
from harness.build.labels import build_label, cpu_build_of
from harness.compare.verdicts import (
    DEFAULT_METRICS,
    CaseComparison,
    ComparisonReport,
    MetricSpec,
    MetricVerdict,
    RoleResult,
    build_report,
    compare_case,
    spec_of,
)
from harness.contract.profile import describe_profile
from harness.expectations.judge import ExpectationCheck, judge_role
from harness.measure.client_side import not_comparable
from harness.pipeline import RunInterrupted, RunOptions, execute_run, resolve_for
from harness.records.manifest import Manifest, manifest_mismatch
from harness.records.metric_definitions import (
    COMPARED,
    METRICS,
    PHASE_COMPARED,
    SHOWN,
    client_timed,
    measured_positions,
    position_figure,
    relative_tolerances,
)
from harness.records.outcome import MEASURED, Outcome
from harness.records.run_record import RunRecord
from harness.scenario import Case, LoadedScenario
from harness.scenario.model import RelativeChecks
from harness.server.pool import ServerPool
from harness.util.clock import folder_stamp
from harness.util.errors import EXIT_FAIL, EXIT_INFRA, EXIT_OK, UserError
from harness.util.interrupts import Shield
from harness.util.output_path import make_folder
from harness.util.paths import reports_root
from harness.workload.phases import phase_metric

__all__ = ["ComparisonRun", "compare_cases", "manifest_problem", "role_specs"]

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class ComparisonRun:
    """What ``compare_cases`` produced: the comparison, its folder, and every run record."""

    report: ComparisonReport
    report_dir: Path
    runs: tuple[RunRecord, ...]

    @property
    def exit_code(self) -> int:
        """design.md: 0 every expectation held, 1 one did not, 3 a role could not run (or the comparison was
        interrupted) and nothing that did run failed."""
        if not self.report.all_expectations_held:
            return EXIT_FAIL
        if self.report.any_not_run or self.report.partial:
            return EXIT_INFRA
        return EXIT_OK


def role_specs(loaded: LoadedScenario, *, overrides: Mapping[str, str], reference: bool,
               cpu: bool = False) -> dict[str, str]:
    """Build spec per role, baseline first: the relative checks' baseline, else ``before``, else the first
    role of the file; then ``after``; then the rest in file order. ``reference``: each role's reference-server
    revision; ``cpu``: each role's release on the real-SGLang CPU build."""
    roles = loaded.scenario.builds
    unknown = set(overrides) - set(roles)
    if unknown:
        raise UserError(f"no build role {sorted(unknown)[0]!r} in {loaded.file} (roles: {', '.join(roles)})")
    rel = loaded.scenario.checks.relative
    first = [r for r in (rel.baseline if rel else None, "before", "after") if r in roles]
    order = list(dict.fromkeys([*first, *roles]))

    def default(role: str) -> str:
        if reference:
            return roles[role].sim_spec
        return cpu_build_of(roles[role].spec) if cpu else roles[role].spec

    return {role: overrides.get(role) or default(role) for role in order}


def _relative_checks(rel: RelativeChecks | None, case: CaseComparison) -> list[ExpectationCheck]:
    """checks.relative: a later role may not be significantly worse than the baseline beyond the tolerance."""
    if rel is None:
        return []
    out = []
    for metric in case.metrics:
        entry = METRICS.get(metric.metric)
        tolerance = getattr(rel, entry.relative_check) if entry is not None and entry.relative_check else None
        if tolerance is None or metric.before_role != rel.baseline:
            continue
        worse = metric.verdict is MetricVerdict.WORSE and metric.delta_rel < -tolerance
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


def _role_result(role: str, spec: str, runs: Sequence[RunRecord], report_dir: Path) -> RoleResult:
    # A stateful workload's per-phase figures (NAME@PHASE) are shown and kept beside the run-level ones.
    phased = {name for r in runs for name in r.metrics if "@" in name}
    names = sorted({m.name for m in DEFAULT_METRICS} | {m.name for m in SHOWN} | phased)
    # A trial that crashed or never ran its workload has no meaningful speed (a crash "measures" 0 tok/s): leave
    # it blank. One whose client fell behind measured the client's lateness in its timed figures (rates,
    # latencies): leave those blank, but its counts (tokens per verify step, hit rates) are the server's and
    # stay -- blanking them too turned a loaded machine's stateful comparison into "not enough data".
    # A failed check ran the whole workload: its figures are what the check judged.
    ran = [r.outcome in MEASURED for r in runs]
    behind = [not_comparable(r.metrics) is not None for r in runs]
    metrics = {
        name: tuple(v if (v := r.metric(name)) is not None and ok and not (late and client_timed(name))
                    else float("nan") for r, ok, late in zip(runs, ran, behind))
        for name in names
    }
    first = runs[0]
    return RoleResult(
        role=role,
        build=spec,
        build_kind=first.build.kind,
        version=first.build.version or "",
        outcomes=tuple(r.outcome for r in runs),
        signatures=tuple(r.signature for r in runs),
        reasons=tuple(r.reason for r in runs),
        metrics=metrics,
        artifact_dirs=tuple(str(Path(r.artifacts).resolve().relative_to(report_dir.resolve())) for r in runs),
        excerpt=next((r.excerpt for r in runs if r.excerpt), ""),
        reference_server=first.build.reference_server,
        label=first.build.label or build_label(first.build.spec, reference_server=first.build.reference_server) or "",
        attention_backend=next((label for r in runs if (label := _backend_label(r))), ""),
        profile=describe_profile(first.build.profile),
    )


def _backend_label(run: RunRecord) -> str:
    """``triton``, or ``triton, draft trtllm_mha`` when the draft runs another backend; "" when unknown."""
    decode, draft = run.server.attention_backend, run.server.draft_attention_backend
    if not decode:
        return ""
    return decode if not draft or draft == decode else f"{decode}, draft {draft}"


def _metric_specs(tolerances: RelativeChecks | None) -> list[MetricSpec]:
    """The judged metrics; a relative check's tolerance is also the smallest effect that counts."""
    allowed = relative_tolerances(tolerances)
    return [spec_of(m, allowed.get(m.name)) for m in COMPARED]


def _phase_specs(case: Case, by_role: Mapping[str, Sequence[RunRecord]]) -> list[MetricSpec]:
    """One spec per (figure, phase) of a stateful workload (the registry's PHASE_COMPARED, then the acceptance
    rate at every draft position the trials measured), in phase order; none for a plain one."""
    measured = {name for runs in by_role.values() for r in runs for name in r.metrics}
    specs = []
    for phase in case.scenario.workload.phase_names:
        positions = [position_figure(k) for k in range(1, measured_positions(measured, phase) + 1)]
        specs += [MetricSpec(phase_metric(m.name, phase), f"{m.label}, phase {phase}", m.unit, m.higher_is_better,
                             m.min_effect or 0.02) for m in (*PHASE_COMPARED, *positions)]
    return specs


def manifest_problem(by_role: Mapping[str, Sequence[RunRecord]]) -> str | None:
    """Why the roles' workloads may not be compared (a field of their manifests differs), or None."""
    first: tuple[str, Manifest] | None = None
    for role, runs in by_role.items():
        for record in runs:
            if record.manifest is None:
                continue
            if first is None:
                first = (role, record.manifest)
                continue
            problem = manifest_mismatch(first[1], record.manifest)
            if problem:
                return f"{first[0]} vs {role} trial {record.trial}: {problem}"
    return None


def _compare_one(case: Case, specs: Mapping[str, str], by_role: Mapping[str, Sequence[RunRecord]],
                 report_dir: Path, notes: list[str]) -> CaseComparison:
    ran = {role: runs for role, runs in by_role.items() if runs}
    roles = [_role_result(role, specs[role], runs, report_dir) for role, runs in ran.items()]
    checks = [judge_role(role, case.scenario.expect[role], runs)
              for role, runs in ran.items() if role in case.scenario.expect]
    tolerances = case.scenario.checks.relative
    specs_judged = _metric_specs(tolerances) + _phase_specs(case, ran)
    if any(r.manifest is not None and r.manifest.ignore_eos for runs in ran.values() for r in runs):
        notes.append(f"{case.name}: acceptance measured with ignore_eos: true (the draft keeps proposing past the "
                     "answer, which changes acceptance; TensorRT-LLM PR #14347 turns it off for spec-decoding tests)")
    problem = manifest_problem(ran)
    if problem:
        notes.append(f"{case.name}: metrics not compared, the workloads differ ({problem})")
        specs_judged = []
    base = compare_case(case.name, case.values, roles, checks, metrics=specs_judged)
    checks += _relative_checks(tolerances, base)
    # A pull request's CI run has one build and no pair: its acceptance is held against the recorded baseline
    # (harness.baselines), and the report says how, as pytest -m gpu does.
    baselines = tuple(r for r in (judge_role_baselines(case, role, runs) for role, runs in ran.items()) if r)
    return CaseComparison(case=base.case, values=base.values, roles=base.roles, expectations=tuple(checks),
                          metrics=base.metrics, verdict=base.verdict, baselines=baselines)


# Stopped by a signal outside any run (between two, in the pool's teardown): no run of its own was cut.
_BETWEEN_RUNS = "between runs"


def _run_case_here(
    case: Case, specs: Mapping[str, str], builds: Builds, n: int, report_dir: Path, options: RunOptions,
    progress: Callable[[RunRecord], None] | None, all_runs: list[RunRecord],
) -> tuple[dict[str, list[RunRecord]], RunRecord | str | None]:
    """``n`` interleaved trials of every role on this machine: the records by role (each also appended to
    ``all_runs`` in the order it ran) and the interrupted run's record if a signal stopped one
    (``_BETWEEN_RUNS`` if it stopped none)."""
    by_role: dict[str, list[RunRecord]] = {role: [] for role in specs}
    resolved = {role: resolve_for(case, spec, builds) for role, spec in specs.items()}
    try:
        # One server per role kept across the case's trials (when the scenario shares servers).
        with ServerPool(report_dir) as pool:
            for trial in range(n):
                for role, build in resolved.items():
                    record = execute_run(case, build, role=role, trial=trial, options=options, pool=pool)
                    by_role[role].append(record)
                    all_runs.append(record)
                    if progress:
                        with Shield():  # the record's store write is whole; a signal meanwhile is raised after it
                            progress(record)
    except RunInterrupted as exc:
        by_role[exc.record.build.role or ""] = [*by_role.get(exc.record.build.role or "", []), exc.record]
        all_runs.append(exc.record)
        if progress:  # the interrupted record goes to the store too, as run's does (issue 24)
            with Shield(reraise=False):  # already interrupted: a second signal must not cut the store's write
                progress(exc.record)
        return by_role, exc.record
    except KeyboardInterrupt:
        # Between two runs, in the pool's teardown after the last one, in a store write: every run that
        # finished is in ``by_role``; the comparison of those is the PARTIAL report (exit 3, never 130).
        return by_role, _BETWEEN_RUNS
    return by_role, None


def compare_cases(
    loaded: LoadedScenario,
    cases: Sequence[Case],
    specs: Mapping[str, str],
    *,
    trials: int | None = None,
    out_root: Path | None = None,
    progress: Callable[[RunRecord], None] | None = None,
    builds: Builds | None = None,
    elsewhere: Callable[[Path], Mapping[tuple[str, str], Sequence[RunRecord]]] | None = None,
) -> ComparisonRun:
    """Run every case under every role (interleaved trials); the comparison of what ran.

    Each spec is resolved once, through ``builds`` (the command's, shared with its pre-flight). With
    ``elsewhere`` (an executor: harness.executor) every run goes there at once, given the report folder as
    the output root, and comes back as records by (case name, role)."""
    builds = builds or Builds()
    report_id = f"{folder_stamp()}-{loaded.scenario.name[:40]}-{secrets.token_hex(2)}"
    report_dir = (out_root or reports_root()) / "compare" / report_id
    make_folder(report_dir.parent, "the compare folder")
    make_folder(report_dir, "the compare report folder", exist_ok=False)
    options = RunOptions(out_root=report_dir, progress=False)
    all_runs: list[RunRecord] = []
    compared: list[CaseComparison] = []
    notes = ["roles: " + ", ".join(f"{role} = {spec}" for role, spec in specs.items())]
    partial = ""
    ran_elsewhere = elsewhere(report_dir) if elsewhere is not None else None
    by_role: dict[str, list[RunRecord]]
    for case in cases:
        if ran_elsewhere is not None:
            by_role = {role: list(ran_elsewhere.get((case.name, role), ())) for role in specs}
            all_runs.extend(r for runs in by_role.values() for r in runs)
            if any(r.outcome is Outcome.INTERRUPTED for runs in by_role.values() for r in runs):
                partial = "interrupted: the unfinished jobs were cancelled"
            if any(by_role.values()):
                compared.append(_compare_one(case, specs, by_role, report_dir, notes))
            continue
        by_role, stopped = _run_case_here(case, specs, builds, trials or case.scenario.workload.trials, report_dir,
                                          options, progress, all_runs)
        if stopped == _BETWEEN_RUNS:
            partial = (f"interrupted after {len(all_runs)} run(s), in {case.name}; {len(compared)} of {len(cases)} "
                       "case(s) complete before it")
        elif isinstance(stopped, RunRecord):
            partial = (f"interrupted during {case.name} ({stopped.build.role}, trial {stopped.trial}); "
                       f"{len(compared)} of {len(cases)} case(s) complete")
        with Shield(reraise=False) as late:  # comparing what ran is short; a signal now makes the report PARTIAL
            if any(by_role.values()):
                compared.append(_compare_one(case, specs, {r: v for r, v in by_role.items() if r in specs},
                                             report_dir, notes))
        if late.count and not partial:
            partial = f"interrupted after {case.name}; {len(compared)} of {len(cases)} case(s) complete"
        if partial:
            break
    report = build_report(report_id, loaded.scenario.name, str(loaded.file), compared, notes=notes, partial=partial)
    return ComparisonRun(report=report, report_dir=report_dir, runs=tuple(all_runs))
