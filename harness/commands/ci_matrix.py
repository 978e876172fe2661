"""sglang-repro ci-matrix SCENARIOS --format github|buildkite|gitlab: the job matrix a CI system takes."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.ci_matrix import FORMATS, RUNNERS, check_job_store, plan_jobs, render, scenario_paths, seen_minutes
from harness.commands._common import add_set_argument, scenario_overrides

DESCRIPTION = ("Print the CI job matrix of the scenarios: cases grouped by the hardware they need (a runner label "
               "per GPU kind and count), each group split into shards that fit --max-minutes by the durations the "
               "store has seen, each job's command its `nightly --shard K/N` line (--runner pytest: `pytest -m gpu "
               "--shard K/N`).")


def _minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a number of minutes") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be > 0")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenarios", nargs="+", type=Path, metavar="SCENARIO", help="scenario files or folders")
    parser.add_argument("--format", choices=FORMATS, required=True, help="the CI system's matrix format")
    add_set_argument(parser)  # grouped by the overridden hardware, and carried into every job's command
    parser.add_argument("--max-minutes", type=_minutes, metavar="M", help="split each group into shards of at most M")
    parser.add_argument("--store", metavar="URL", help="durations seen in this store (default: none)")
    parser.add_argument("--default-minutes", type=_minutes, default=10.0, metavar="M",
                        help="minutes per run of a case the store has not seen (default 10)")
    parser.add_argument("--build", default="$BUILD", metavar="SPEC",
                        help="the build in the commands (default: $BUILD, the CI variable)")
    parser.add_argument("--runner", choices=RUNNERS, default="nightly",
                        help="what each job runs: nightly --shard K/N (default), or pytest -m gpu --shard K/N")
    parser.add_argument("--job-store", default="$SGLANG_REPRO_STORE", metavar="URL",
                        help="the store in the commands (default: $SGLANG_REPRO_STORE, the CI variable)")


def main(args: argparse.Namespace) -> int:
    check_job_store(args.job_store)  # before any work: a password would land in every job's command
    loaded = scenario_paths(args.scenarios, scenario_overrides(args))
    jobs = plan_jobs(loaded, max_minutes=args.max_minutes, seen=seen_minutes(args.store),
                     default_minutes=args.default_minutes, build=args.build, store_arg=args.job_store,
                     runner=args.runner, sets=args.set)
    print(render(jobs, args.format, max_minutes=args.max_minutes))
    return 0
