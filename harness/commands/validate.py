"""sglang-repro validate PATH...: check scenario files; one line per problem."""

from __future__ import annotations

import argparse
import gc

from harness.scenario import load_paths


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="scenario files or folders")
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing when all are valid")


def main(args: argparse.Namespace) -> int:
    loaded = load_paths(args.paths)
    if not args.quiet:
        cases = sum(len(item.cases) for item in loaded)
        for item in loaded:
            print(f"{item.file}: ok ({item.scenario.name}, {len(item.cases)} case(s))")
        print(f"{len(loaded)} file(s) valid, {cases} case(s)")
    # The models of every case are what the interpreter's exit collects last: a full pass over them all, an
    # eighth of validating 600 files. Frozen, they are freed as ever when the interpreter clears them (none
    # holds a file or a process), without that walk.
    gc.freeze()
    return 0
