"""sglang-repro compare SCENARIO: before vs after, expectations checked, statistics, reports."""

from __future__ import annotations

import argparse
import sys

from harness.build import Builds, parse_build_spec
from harness.commands._common import add_scenario_arguments, selected_cases
from harness.commands._store_args import add_store_arguments, store_choice
from harness.compare.runner import compare_cases, role_specs
from harness.compare.verdicts import ComparisonReport
from harness.executor.options import add_executor_arguments
from harness.launch.preflight_batch import check_flags_up_front
from harness.records.metric_definitions import ACCEPT_LENGTH, OUTPUT_THROUGHPUT
from harness.records.run_record import RunRecord
from harness.report import write_reports
from harness.store.store import new_batch
from harness.store.writer import DeferredWriter, finish_store
from harness.util.errors import UserError
from harness.util.interrupts import Shield


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_scenario_arguments(parser, trials_help="trials per case and role (default: the scenario's)")
    parser.add_argument("--before", metavar="SPEC", help="build spec of the 'before' role (default: the scenario's)")
    parser.add_argument("--after", metavar="SPEC", help="build spec of the 'after' role (default: the scenario's)")
    parser.add_argument("--build", action="append", default=[], metavar="ROLE=SPEC",
                        help="build spec of any role (repeatable)")
    parser.add_argument("--reference", action="store_true",
                        help="run each role's CPU reference-server revision instead of its real build")
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


def _progress(record: RunRecord) -> None:
    sig = f" {record.signature}" if record.signature else ""
    phase = f" at {record.phase.value}" if record.phase and record.outcome.value != "pass" else ""
    print(f"  {record.case.name:<28} {record.build.role or '':<8} trial {record.trial}: "
          f"{record.outcome.value}{sig}{phase}", file=sys.stderr, flush=True)


def summary(report: ComparisonReport) -> list[str]:
    """The short summary printed at the end: per case, what each role did and the verdict."""
    lines = []
    for case in report.cases:
        parts = []
        for role in case.roles:
            text = f"{role.role}: {role.outcome}"
            if role.signature:
                text += f" ({role.signature})"
            acc = role.passing_values(ACCEPT_LENGTH.name)
            tput = role.passing_values(OUTPUT_THROUGHPUT.name)
            if acc:
                text += f", accept length {sum(acc) / len(acc):.2f}"
            if tput:
                text += f", {sum(tput) / len(tput):.1f} tok/s"
            parts.append(text)
        if not case.expectations_held:
            held = "EXPECTATION NOT HELD"
        elif case.not_run:
            held = "NOT RUN: " + "; ".join(f"{c.role}: {c.not_run}" for c in case.not_run)
        else:
            held = "expectations held"
        observed = [c for c in case.expectations if c.observation]
        if observed:
            held += "; hypothesis not confirmed: " + ", ".join(f"{c.role} expected {c.expected_text}" for c in observed)
        lines.append(f"{case.case}: {'; '.join(parts)} -> {held}; metrics {case.verdict}")
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
    specs = role_specs(loaded, overrides=_overrides(args), reference=args.reference)
    for spec in specs.values():
        parse_build_spec(spec)  # a bad spec is one line, before anything is said or run
    print(f"comparing {loaded.scenario.name}: {len(cases)} case(s), roles "
          + ", ".join(f"{r}={s}" for r, s in specs.items()), file=sys.stderr, flush=True)
    builds = Builds()  # each build resolved once for the whole comparison
    check_flags_up_front(cases, specs.values(), builds)  # one parser process per build, not one per run
    writer = DeferredWriter(store, new_batch("compare"))

    def progress(record: RunRecord) -> None:
        _progress(record)
        writer.record(record)

    elsewhere = None
    if args.executor == "slurm":  # every case, role and trial as a SLURM job (harness.executor)
        from harness.executor.fanout import compare_on_slurm
        elsewhere = compare_on_slurm(args, cases, specs, writer, progress)
    ran = compare_cases(loaded, cases, specs, trials=args.trials, out_root=args.out, progress=progress, builds=builds,
                        elsewhere=elsewhere)
    # The report is written whole: a signal now waits for it, and an interrupted comparison's second signal
    # changes nothing (issue 24); a first one still interrupts afterwards.
    with Shield(reraise=not ran.report.partial):
        paths = write_reports(ran.report, ran.report_dir)
        for line in summary(ran.report):
            print(line)
        for note in ran.report.notes:
            if "metrics not compared" in note:
                print(f"note: {note}")
        print(verdict_line(ran.report))
        print(f"report: {paths['html']}")
        return finish_store(writer, ran.exit_code)
