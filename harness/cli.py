"""The ``sglang-repro`` command line: an argparse root over ``harness.commands``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from harness import __version__
from harness.commands import discover
from harness.errors import EXIT_USAGE, HarnessError

__all__ = ["main", "make_parser"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # same exit code as bad input, one line
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def make_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="sglang-repro",
        description="Reproduction and regression harness for SGLang servers.",
    )
    parser.add_argument("--version", action="version", version=f"sglang-repro {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for mod in discover():
        p = sub.add_parser(mod.COMMAND, help=mod.HELP, description=getattr(mod, "DESCRIPTION", mod.HELP))
        mod.add_arguments(p)
        p.set_defaults(_main=mod.main)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        if os.environ.get("SGLANG_REPRO_GPU_INVENTORY") is not None:
            from harness.hardware import injected_inventory

            injected_inventory()  # a malformed value is bad input before anything starts, not a traceback later
        return int(args._main(args))
    except HarnessError as exc:
        # Errors that already name their file and line (scenario problems) stand alone, one per line.
        for line in getattr(exc, "lines", None) or [f"sglang-repro: {exc}"]:
            print(line, file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `sglang-repro list ... | head`
        sys.stderr.close()
        return 0
