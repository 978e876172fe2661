"""sglang-repro compare SCENARIO: before vs after, expectations checked, statistics, reports."""

from __future__ import annotations

import argparse
import sys

from harness.build import Builds, parse_build_spec
from harness.build.labels import build_label
from harness.commands._common import add_scenario_arguments, selected_cases
from harness.commands._store_args import add_store_arguments, store_choice
from harness.compare.runner import compare_cases, role_specs
from harness.compare.verdicts import ComparisonReport, MetricVerdict
from harness.executor.options import add_executor_arguments
from harness.launch.preflight_batch import check_flags_up_front
from harness.records.outcome import Outcome
from harness.records.run_record import RunRecord
from harness.report import write_reports
from harness.scenario import Case
from harness.store.store import new_batch
from harness.store.writer import DeferredWriter, finish_store
from harness.util.errors import EXIT_INFRA, UserError
from harness.util.interrupts import Shield
from harness.util.progress import NO_PROGRESS_HELP, Progress


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_scenario_arguments(parser, trials_help="trials per case and role (default: the scenario's)")
    parser.add_argument("--before", metavar="SPEC", help="build spec of the 'before' role (default: the scenario's)")
    parser.add_argument("--after", metavar="SPEC", help="build spec of the 'after' role (default: the scenario's)")
    parser.add_argument("--build", action="append", default=[], metavar="ROLE=SPEC",
                        help="build spec of any role (repeatable)")
    parser.add_argument("--reference", action="store_true",
                        help="run each role's CPU reference-server revision instead of its real build")
    parser.add_argument("--cpu", action="store_true",
                        help="run each role's release on the real-SGLang CPU build (pip:sglang==X,deps=cpu, the "
                             "scenario's cpu: section): real SGLang, plain-torch kernels on CPU")
    parser.add_argument("--no-progress", action="store_true", help=NO_PROGRESS_HELP)
    add_store_arguments(parser)
    add_executor_arguments(parser)


def _overrides(args: argparse.Namespace) -> dict[str, str]:
    out = {}
    for item in args.build:
        role, sep, spec = item.partition("=")
        if not sep or not role or not spec:
            raise UserError(f"--build {item!r}: expected ROLE=SPEC, e.g. after=pip:sglang==0.5.15")
        out[role] = spec
    for role in ("before", "after"):
        if getattr(args, role):
            out[role] = getattr(args, role)
    return out


def _trial_line(record: RunRecord) -> str:
    sig = f" {record.signature}" if record.signature else ""
    phase = f" at {record.phase.value}" if record.phase and record.outcome is not Outcome.PASS else ""
    return (f"  {record.case.name:<28} {record.build.role or '':<8} trial {record.trial}: "
            f"{record.outcome.value}{sig}{phase}")


def _planned_runs(cases: list[Case], roles: int, trials: int | None, reference: bool, cpu: bool = False) -> int:
    """Runs the comparison plans: trials per case (the reference server's or CPU build's own when it runs) x roles."""
    return sum((trials or (c.for_reference() if reference else c.for_cpu() if cpu else c).scenario.workload.trials)
               * roles for c in cases)


def summary(report: ComparisonReport) -> list[str]:
    """The short summary printed at the end: per case the outcome before -> after, what changed (a removed crash,
    or each metric's verdict with its interval), whether the expectations held; then the notes, each once."""
    from harness.report import _format as fmt

    width = max((len(c.case) for c in report.cases), default=0)
    lines = []
    for case in report.cases:
        change = fmt.outcome_change(case)
        sig = next((f" ({r.signature})" for r in case.roles if r.signature), "")
        what = fmt.case_change(case)
        parts = [f"{what}{sig}"] if what else []
        parts += [fmt.metric_line(m) for m in case.metrics
                  if not (what and m.verdict is MetricVerdict.NOT_ENOUGH_DATA)]
        if not case.expectations_held:
            held = "EXPECTATION NOT HELD"
        elif case.not_run:
            held = "NOT RUN: " + "; ".join(f"{c.role}: {c.not_run}" for c in case.not_run)
        else:
            held = "expectations held"
        observed = [c for c in case.expectations if c.observation]
        if observed:
            held += "; hypothesis not confirmed: " + ", ".join(f"{c.role} expected {c.expected_text}" for c in observed)
        lines.append(f"{case.case:<{width}}  {change:<14} {'; '.join(parts) or '-'} [{held}]")
    return lines


def verdict_line(report: ComparisonReport) -> str:
    if not report.all_expectations_held:
        text = "an expectation did NOT hold"
    elif report.any_not_run:
        reasons = {c.not_run for case in report.cases for c in case.not_run}
        text = f"could not run every case ({len(reasons)} reason(s)): {sorted(reasons)[0]}"
    else:
        text = "every expectation held"
    return f"verdict: {text}" + (f" (PARTIAL: {report.partial})" if report.partial else "")


def main(args: argparse.Namespace) -> int:
    loaded, cases = selected_cases(args)
    store = store_choice(args)  # a store that can never be opened is bad input, before anything is said or run
    if args.cpu and args.reference:
        raise UserError("--cpu and --reference: choose one (the real-SGLang CPU build, or the reference server)")
    specs = role_specs(loaded, overrides=_overrides(args), reference=args.reference, cpu=args.cpu)
    for spec in specs.values():
        parse_build_spec(spec)  # a bad spec is one line, before anything is said or run
    print(f"comparing {loaded.scenario.name}: {len(cases)} case(s), roles "
          + ", ".join(f"{r}={s}" + (f" ({label})" if (label := build_label(s)) else "") for r, s in specs.items()),
          file=sys.stderr, flush=True)
    builds = Builds()  # each build resolved once for the whole comparison
    check_flags_up_front(cases, specs.values(), builds)  # one parser process per build, not one per run
    writer = DeferredWriter(store, new_batch("compare"))

    bar = Progress("compare", _planned_runs(cases, len(specs), args.trials, args.reference, args.cpu), plain=args.no_progress)
    order = {c.name: i for i, c in enumerate(cases)}
    bar.show(f"case 1 of {len(cases)}", "starting")

    def progress(record: RunRecord) -> None:
        bar.step()
        where = f"case {order.get(record.case.name, 0) + 1} of {len(cases)}"
        if bar.tty:
            bar.note(_trial_line(record))
            bar.show(where, f"last: {record.case.name}")
        else:
            bar.show(where, " ".join(_trial_line(record).split()))  # one line in a log: no table padding
        writer.record(record)

    elsewhere = None
    if args.executor == "slurm":  # every case, role and trial as a SLURM job (harness.executor)
        from harness.executor.fanout import compare_on_slurm
        elsewhere = compare_on_slurm(args, cases, specs, writer, progress)
    ran = compare_cases(loaded, cases, specs, trials=args.trials, out_root=args.out, progress=progress, builds=builds,
                        elsewhere=elsewhere)
    bar.finish()
    # The report is written whole: a signal now waits for it and changes nothing of it (issue 24). Every run is
    # recorded by now, so a signal that came meanwhile ends the command as interrupted (exit 3), never 130.
    with Shield(reraise=False) as late:
        paths = write_reports(ran.report, ran.report_dir)
        for line in summary(ran.report):
            print(line)
        from harness.report._format import grouped_notes

        for note in grouped_notes(ran.report.notes, [c.case for c in ran.report.cases]):
            if "metrics not compared" in note:
                print(f"note: {note}")
        print(verdict_line(ran.report))
        print(f"report: {paths['html']}")
        code = finish_store(writer, ran.exit_code)
    if late.count and not ran.report.partial:
        print("interrupted while the report was written; the report is whole", file=sys.stderr)
        return code or EXIT_INFRA
    return code
