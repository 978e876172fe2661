"""sglang-repro validate PATH...: check scenario files; one line per problem."""

from __future__ import annotations

import argparse
import sys

from harness.commands._common import add_set_argument, scenario_overrides
from harness.scenario import load_paths


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="scenario files or folders")
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing when all are valid")
    add_set_argument(parser)


def main(args: argparse.Namespace) -> int:
    loaded = load_paths(args.paths, overrides=scenario_overrides(args))
    for item in loaded:  # valid, but text the author meant to keep was dropped as a comment
        for hazard in item.hazards:
            print(hazard.message(item.file), file=sys.stderr)
    if not args.quiet:
        cases = sum(len(item.cases) for item in loaded)
        for item in loaded:
            print(f"{item.file}: ok ({item.scenario.name}, {len(item.cases)} case(s))")
        print(f"{len(loaded)} file(s) valid, {cases} case(s)")
    return 0
