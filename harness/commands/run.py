"""sglang-repro run SCENARIO: run each case against one build and decide an outcome."""

from __future__ import annotations

import argparse
import sys

from harness.build import Builds
from harness.commands._common import add_scenario_arguments, selected_cases
from harness.commands._store_args import add_store_arguments, store_choice
from harness.executor.options import add_executor_arguments
from harness.launch.preflight_batch import check_flags_up_front
from harness.pipeline import RunDiskFull, RunInterrupted, RunOptions, execute_run, resolve_for
from harness.records.metric_definitions import ACCEPT_LENGTH, OUTPUT_THROUGHPUT
from harness.records.outcome import Outcome, exit_code_for
from harness.records.run_record import RunRecord
from harness.scenario.roles import resolve_role
from harness.server.pool import ServerPool
from harness.store.store import new_batch
from harness.store.writer import DeferredWriter, finish_store
from harness.util.errors import EXIT_INFRA
from harness.util.interrupts import Shield
from harness.util.paths import reports_root
from harness.util.progress import NO_PROGRESS_HELP


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_scenario_arguments(parser, trials_help="trials per case (default: the scenario's)")
    parser.add_argument(
        "--build", required=True, metavar="SPEC",
        help="sim:pre-fix|post-fix[,knob=v], python:PATH, pip:sglang==X, src:CHECKOUT[@REV], "
             "or a role of the scenario (e.g. before)",
    )
    parser.add_argument("--reference", action="store_true",
                        help="with a role: run the role's reference-server revision (CPU) instead of its real build")
    parser.add_argument("--cpu", action="store_true",
                        help="with a role: its release on the real-SGLang CPU build (pip:sglang==X,deps=cpu, the "
                             "scenario's cpu: section): real SGLang, plain-torch kernels on CPU")
    parser.add_argument("--no-progress", action="store_true", help=NO_PROGRESS_HELP)
    add_store_arguments(parser)
    add_executor_arguments(parser)


def summary_line(record: RunRecord) -> str:
    build = record.build.spec + (f" ({record.build.label})" if record.build.label else "")  # never taken for a GPU figure
    parts = [f"{record.outcome.value.upper():7}", record.case.name, build]
    if record.phase and record.outcome is not Outcome.PASS:
        parts.append(f"phase={record.phase.value}")
    if record.signature:
        parts.append(f"signature={record.signature}")
    accept, tput = record.metric(ACCEPT_LENGTH.name), record.metric(OUTPUT_THROUGHPUT.name)
    if accept is not None:
        parts.append(f"{ACCEPT_LENGTH.name}={accept:.3f}")
    if tput is not None:
        parts.append(f"output_tok_s={tput:.1f}")
    if record.outcome is not Outcome.PASS:
        parts.append(f"reason: {record.reason}")
    return "  ".join(parts) + f"\n        -> {record.artifacts}"


def main(args: argparse.Namespace) -> int:
    _, cases = selected_cases(args)
    options = RunOptions(out_root=args.out, progress=False if args.no_progress else None)
    outcomes: list[Outcome] = []
    writer = DeferredWriter(store_choice(args), new_batch("run"))
    builds = Builds()  # each build resolved once for every case and trial
    # One parser process for every case's flags, not one per run.
    check_flags_up_front(cases, dict.fromkeys(resolve_role(case, args.build, args.reference, cpu=args.cpu)[0] for case in cases),
                         builds)
    if args.executor == "slurm":  # one SLURM job per case and trial (harness.executor)
        from harness.executor.fanout import run_on_slurm
        from harness.executor.job import PlannedCase
        return run_on_slurm(args, [PlannedCase(c, *resolve_role(c, args.build, args.reference, cpu=args.cpu)) for c in cases],
                            store_choice(args), summary_line)
    try:
        for case in cases:
            spec, role = resolve_role(case, args.build, args.reference, cpu=args.cpu)
            build = resolve_for(case, spec, builds)
            with ServerPool(args.out or reports_root()) as pool:
                for trial in range(args.trials or case.scenario.workload.trials):
                    try:
                        record = execute_run(case, build, role=role, trial=trial, options=options, pool=pool)
                    except RunInterrupted as exc:
                        print(summary_line(exc.record), flush=True)
                        with Shield(reraise=False):  # already stopping: a second signal must not cut the row
                            writer.record(exc.record)  # a full disk under --out is not the store's: still reached
                        if isinstance(exc, RunDiskFull):
                            print(f"sglang-repro: {exc}", file=sys.stderr)
                            return finish_store(writer, EXIT_INFRA)
                        return finish_store(writer, exit_code_for([*outcomes, exc.record.outcome]))
                    with Shield():  # the record's row is written whole; a signal meanwhile is raised after it
                        outcomes.append(record.outcome)
                        print(summary_line(record), flush=True)
                        writer.record(record)
    except KeyboardInterrupt:
        # Between runs or in a shared server's teardown: every run that finished is recorded; exit 3, not 130.
        if not outcomes:
            raise
        print(f"sglang-repro: interrupted; the {len(outcomes)} finished run(s) are recorded", file=sys.stderr)
        return finish_store(writer, EXIT_INFRA)
    return finish_store(writer, exit_code_for(outcomes))
