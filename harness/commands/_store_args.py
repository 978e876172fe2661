"""``--store URL`` / ``--no-store``, shared by the commands that record runs (run, compare, minimize)."""

from __future__ import annotations

import argparse
import sys

from harness.errors import EXIT_INFRA
from harness.store.url import default_store
from harness.store.writer import DeferredWriter

__all__ = ["add_store_arguments", "finish_store", "store_choice"]


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", metavar="URL",
                        help="record results here (default: $SGLANG_REPRO_STORE, else OUT/results.db)")
    parser.add_argument("--no-store", action="store_true", help="record nothing")


def store_choice(args: argparse.Namespace) -> str | None:
    if args.no_store:
        return None
    return str(args.store or default_store(args.out))


def finish_store(writer: DeferredWriter, exit_code: int) -> int:
    """The command's exit code once the store has had its say: a store that failed makes it infra."""
    writer.close()
    if writer.error is None:
        return exit_code
    print(f"sglang-repro: {writer.error} (the run artifacts are written)", file=sys.stderr)
    return EXIT_INFRA
