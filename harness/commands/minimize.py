"""sglang-repro minimize SCENARIO --case NAME --build SPEC: the smallest case that still fails the same way."""

from __future__ import annotations

import argparse
import logging
import math
import sys
from pathlib import Path

from harness.build import resolve_build
from harness.commands._common import add_set_argument, scenario_overrides
from harness.commands._store_args import store_choice
from harness.pipeline import RunInterrupted
from harness.records.run_record import RunRecord
from harness.scenario import load_file, select_cases
from harness.scenario.roles import resolve_role
from harness.util.argtypes import positive_int
from harness.util.atomic import write_atomic
from harness.util.errors import EXIT_INTERRUPTED, UserError
from harness.util.interrupts import Shield
from harness.util.output_path import check_output_file, check_output_folder
from harness.util.progress import NO_PROGRESS_HELP, Progress

DESCRIPTION = ("Shrink one failing case (server flags, environment variables, workload, prompt length) while the "
               "same failure (outcome, signature, phase, frames) reproduces; write the minimal scenario, the "
               "launch line and the curl that triggers it.")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds (a number > 0), got {text!r}") from None
    if not 0 < value < math.inf:  # NaN fails both; "inf" would make the bound no bound
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds > 0, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenario", type=Path, metavar="SCENARIO", help="a scenario file")
    parser.add_argument("--case", metavar="NAME", help="the case (needed when the scenario has several)")
    parser.add_argument("--build", required=True, metavar="SPEC",
                        help="sim:pre-fix|post-fix, python:PATH, pip:sglang==X, src:CHECKOUT[@REV], or a role")
    parser.add_argument("--reference", action="store_true",
                        help="with a role: its reference-server revision (CPU) instead of its real build")
    parser.add_argument("--cpu", action="store_true",
                        help="with a role: its release on the real-SGLang CPU build (pip:sglang==X,deps=cpu, the "
                             "scenario's cpu: section): real SGLang, plain-torch kernels on CPU")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE", help="where to write the minimal YAML")
    parser.add_argument("--budget", type=_seconds, metavar="SECONDS",
                        help="bound on the search; the final 3-run confirmation comes on top")
    parser.add_argument("--jobs", type=positive_int, default=1, metavar="N", help="candidates run in parallel")
    parser.add_argument("--out", type=Path, metavar="DIR", help="output root (default: reports/)")
    parser.add_argument("--store", metavar="URL", help="record every run in this results store and answer "
                                                       "configurations seen before from it (default: "
                                                       "$SGLANG_REPRO_STORE, else OUT/results.db)")
    parser.add_argument("--no-store", action="store_true",
                        help="record nothing; only this session's runs are reused")
    parser.add_argument("--plain", action="store_true",
                        help="textbook ddmin in the scenario's order, no known run reused (the benchmark's peer)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log every try")
    parser.add_argument("--no-progress", action="store_true", help=NO_PROGRESS_HELP)
    add_set_argument(parser)


def main(args: argparse.Namespace) -> int:
    from harness.minimize import MinimizeOptions, minimize
    from harness.minimize.output import render_report

    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    # Outputs first: a minimal YAML that cannot be written must not cost a search (-o FILE/m.yaml).
    if args.output is not None:
        check_output_file(args.output, "-o")
    check_output_folder(args.out, "--out")
    loaded = load_file(args.scenario, overrides=scenario_overrides(args))
    cases = select_cases(loaded, args.case)
    if len(cases) != 1:
        raise UserError(f"{args.scenario}: --case must pick exactly one case; {len(cases)} match: "
                        + ", ".join(c.name for c in cases))
    (case,) = cases
    spec, _ = resolve_role(case, args.build, args.reference, cpu=args.cpu)
    build = resolve_build(spec)
    store = store_choice(args)  # a bad URL is bad input, found before anything runs
    # Minimize cannot know its run count in advance: it shows the runs so far and, with --budget, the time left.
    bar = Progress("minimize", 0, plain=args.no_progress, unit="server runs", budget_s=args.budget)
    bar.show("baseline", f"{case.name} on {spec}")

    def progress(done: int, record: RunRecord) -> None:
        bar.done = done
        sig = f" {record.signature}" if record.signature else ""
        bar.show("", f"last: {record.outcome.value}{sig}")

    try:
        result = minimize(case, build, MinimizeOptions(
            budget_s=args.budget, jobs=args.jobs, plain=args.plain, store=store, out_root=args.out,
            output=args.output, progress=progress))
    except RunInterrupted as exc:
        print(f"sglang-repro minimize: interrupted; nothing written (last run: {exc.record.artifacts})",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        bar.finish()
    report = render_report(result)
    with Shield(reraise=False):  # a second Ctrl-C must not leave half a report
        write_atomic(result.session_dir / "report.md", report)
    print(report, flush=True)
    print(f"report: {result.session_dir / 'report.md'}", flush=True)
    return result.exit_code
