"""sglang-repro prepare SPEC...: create each build's environment ahead of time (cached) and print it."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from harness.build import VALID_SPECS, Build, describe_environment, resolve_build
from harness.build.labels import runs_on_cpu
from harness.build.tiny_model_cache import ensure_tiny_model, is_tiny


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("specs", nargs="+", metavar="SPEC",
                        help=f"{VALID_SPECS}; or tiny:NAME, a tiny model made into the cache (tiny:llama, tiny:gemma4, "
                             "tiny:gemma4-assistant; the Gemma-4 pair with a real-SGLang CPU build's transformers, the "
                             "one prepared before it in the same command when there is one)")
    parser.add_argument("--describe", action="store_true", help="also list the packages of each build's interpreter")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="default: $SGLANG_REPRO_CACHE or ~/.cache/sglang-repro")


def prepared(build: Build) -> dict[str, Any]:
    """What a prepared build is, as ``prepare`` prints it."""
    return {"kind": build.kind, "spec": build.spec, "python": build.python, "launcher": list(build.launcher),
            "env": dict(build.env), "version": build.version, "commit": build.commit, "label": build.label}


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")  # creating an environment takes minutes: say so
    from harness.build.environments import default_cache_dir
    from harness.util.output_path import check_output_folder

    # The cache is written under: a folder (or absent under one) that takes files, reached through no link.
    check_output_folder(args.cache_dir or default_cache_dir(),
                        "--cache-dir" if args.cache_dir is not None else "the cache ($SGLANG_REPRO_CACHE)")
    cpu_python: str | None = None  # the interpreter a tiny Gemma-4 pair is made with
    for spec in args.specs:
        if is_tiny(spec):
            path = ensure_tiny_model(spec, python=cpu_python, cache_dir=args.cache_dir)
            sys.stdout.write(json.dumps({"model": spec, "path": str(path)}, indent=2) + "\n")
            continue
        build = resolve_build(spec, cache_dir=args.cache_dir)
        if runs_on_cpu(build.spec):
            cpu_python = build.python
        record = describe_environment(build) if args.describe else prepared(build)
        sys.stdout.write(json.dumps(record, indent=2) + "\n")
    return 0
