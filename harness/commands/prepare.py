"""sglang-repro prepare SPEC...: create each build's environment ahead of time (cached) and print it."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from harness.build import VALID_SPECS, Build, describe_environment, resolve_build


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("specs", nargs="+", metavar="SPEC", help=VALID_SPECS)
    parser.add_argument("--describe", action="store_true", help="also list the packages of each build's interpreter")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="default: $SGLANG_REPRO_CACHE or ~/.cache/sglang-repro")


def prepared(build: Build) -> dict[str, Any]:
    """What a prepared build is, as ``prepare`` prints it."""
    return {"kind": build.kind, "spec": build.spec, "python": build.python, "launcher": list(build.launcher),
            "env": dict(build.env), "version": build.version, "commit": build.commit}


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")  # creating an environment takes minutes: say so
    from harness.build.environments import default_cache_dir
    from harness.util.output_path import check_output_folder

    # The cache is written under: a folder (or absent under one) that takes files, reached through no link.
    check_output_folder(args.cache_dir or default_cache_dir(),
                        "--cache-dir" if args.cache_dir is not None else "the cache ($SGLANG_REPRO_CACHE)")
    for spec in args.specs:
        build = resolve_build(spec, cache_dir=args.cache_dir)
        record = describe_environment(build) if args.describe else prepared(build)
        sys.stdout.write(json.dumps(record, indent=2) + "\n")
    return 0
