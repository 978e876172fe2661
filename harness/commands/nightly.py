"""sglang-repro nightly SCENARIOS... --build SPEC: run every case, record it, detect, exit 1 only on something new."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

from harness.commands._common import add_set_argument, scenario_overrides
from harness.executor.options import add_executor_arguments
from harness.nightly import Elsewhere, PlannedCase, run_nightly, shard
from harness.scenario import load_paths, select_cases
from harness.scenario.roles import resolve_role
from harness.store.url import default_store
from harness.util.argtypes import positive_int
from harness.util.errors import UserError
from harness.util.progress import NO_PROGRESS_HELP, Progress


def _shard(text: str) -> tuple[int, int]:
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not K/N (e.g. 1/4)") from None
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"{text!r}: K must be within 1..N")
    return k, n


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenarios", nargs="+", type=Path, metavar="SCENARIO", help="scenario files or folders")
    parser.add_argument("--build", required=True, metavar="SPEC", help="the build tonight (a spec or a role)")
    parser.add_argument("--reference", action="store_true", help="with a role: its reference-server revision")
    parser.add_argument("--store", metavar="URL", help="results store (default: $SGLANG_REPRO_STORE or OUT/results.db)")
    parser.add_argument("--shard", type=_shard, metavar="K/N", help="only the K-th of N slices of the cases")
    parser.add_argument("--label", metavar="NAME", help="the night's label (default: its start time)")
    parser.add_argument("--case", metavar="NAME", help="only cases matching (axis=label[,...])")
    parser.add_argument("--trials", type=positive_int, metavar="N", help="trials per case (default: the scenario's)")
    parser.add_argument("--out", type=Path, metavar="DIR", help="output root (default: reports/)")
    parser.add_argument("--no-progress", action="store_true", help=NO_PROGRESS_HELP)
    add_executor_arguments(parser)
    add_set_argument(parser)


def main(args: argparse.Namespace) -> int:
    from harness.build import parse_build_spec
    from harness.commands._store_args import check_store_value
    from harness.util.output_path import check_output_folder

    loaded = load_paths(args.scenarios, overrides=scenario_overrides(args))
    cases = [c for item in loaded for c in select_cases(item, args.case)]
    if args.shard:
        cases = shard(cases, *args.shard)
    if not cases:
        raise UserError("nightly: no case selected")
    planned = [PlannedCase(c, *resolve_role(c, args.build, args.reference)) for c in cases]
    store = args.store or default_store(args.out)
    check_output_folder(args.out, "--out")  # issue 24: outputs and the store checked before any run
    check_store_value(store)
    for spec in {p.spec for p in planned}:
        parse_build_spec(spec)
    bar = Progress("nightly", len(planned), plain=args.no_progress)

    def progress(done: int, current: str) -> None:
        bar.done = done
        bar.show(f"case {min(done + 1, len(planned))} of {len(planned)}", f"now: {current}")

    elsewhere: Elsewhere | None = None
    if args.executor == "slurm":  # every case and trial as a SLURM job (harness.executor)
        from harness.executor.fanout import nightly_on_slurm

        elsewhere = functools.partial(nightly_on_slurm, args)
    result = run_nightly(planned, store=store, label=args.label,
                         trials=args.trials, out_root=args.out, progress=progress, elsewhere=elsewhere)
    bar.finish()
    # The summary is printed interrupted or not: what finished is kept, and the line says so (exit 3).
    state = "interrupted; nothing decided, " if result.interrupted else ""
    print(f"nightly {result.label}: {state}{len(result.records)} runs of {result.planned} cases on {args.build}: "
          + (", ".join(f"{n} {o.value}" for o, n in result.counts.items()) or "none finished")
          + f"; store {result.where}")
    if result.interrupted:
        return result.exit_code
    # Only tonight's transitions: incidents opened (one per change, however many cases and metrics it
    # moved), renamed and resolved. An incident still open is not said again.
    for line in result.found.transitions() if result.found else ():
        print(line)
    # Series too young to judge a change of the size that matters: said, so silence is not read as "no change".
    for line in result.found.young_lines() if result.found else ():
        print(line)
    return result.exit_code
