"""The ``sglang-repro`` command line: an argparse root over ``harness.commands``.

Only the module of the command that runs is imported (plus none for a bare ``--help``), so a
quick command starts without the statistics, HTTP and server stack of ``run`` and ``compare``.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import errno
import gc
import os
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

from harness.commands import COMMANDS, find
from harness.util.errors import EXIT_INFRA, EXIT_INTERRUPTED, EXIT_USAGE, HarnessError, UserError
from harness.util.interrupts import command_signals
from harness.version import harness_version

__all__ = ["entry", "main", "make_parser"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # same exit code as bad input, one line (the usage was up to nine)
        self.exit(EXIT_USAGE, _error_line(f"{self.prog}: error: {message}; see {self.prog} --help") + "\n")


def _named_command(argv: Sequence[str]) -> str | None:
    # The root takes only flags without values (-h, --version), so the first word is the command.
    word = next((arg for arg in argv if not arg.startswith("-")), None)
    return word if word is not None and find(word) is not None else None


# Flags whose empty value their command explains better (``--case ''`` lists the cases to pick from).
_OWN_EMPTY_CHECK = frozenset({"--case"})


def _empty_value(argv: Sequence[str]) -> str | None:
    """The first empty value on the command line, named: ``--out ''`` would mean the current folder
    (``Path('')`` is ``.``) and ``--store ''`` the default store, so an empty value is bad input."""
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if i and argv[i - 1] in _OWN_EMPTY_CHECK:
            continue
        flag, eq, value = arg.partition("=")
        if arg.startswith("--") and eq and not value.strip() and flag not in _OWN_EMPTY_CHECK:
            return f"{flag}: empty value"
        if not arg.strip():
            before = argv[i - 1] if i and argv[i - 1].startswith("-") else None
            return f"{before}: empty value" if before else f"argument {i + 1}: empty"
    return None


def make_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The full parser; given ``argv``, only the command it names gets its arguments (and is imported)."""
    chosen = None if argv is None else _named_command(argv)
    parser = _Parser(
        prog="sglang-repro",
        description="Reproduction and regression harness for SGLang servers.",
    )
    parser.add_argument("--version", action="version", version=f"sglang-repro {harness_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for cmd in COMMANDS:
        if argv is not None and cmd.name != chosen:
            sub.add_parser(cmd.name, help=cmd.help)  # listed by --help, never parsed into
            continue
        mod = cmd.load()
        p = sub.add_parser(cmd.name, help=cmd.help, description=getattr(mod, "DESCRIPTION", cmd.help))
        mod.add_arguments(p)
        p.set_defaults(_main=mod.main)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    empty = _empty_value(argv)
    if empty is not None:
        print(f"sglang-repro: {empty}; give a value", file=sys.stderr)
        return EXIT_USAGE
    try:
        # Inside: a Ctrl-C while the command's modules import (torch, pandas: seconds) is exit 130, no traceback.
        args = make_parser(argv).parse_args(argv)
        _refuse_undecodable(args, argv)
        if os.environ.get("SGLANG_REPRO_GPU_INVENTORY") is not None:
            from harness.server.hardware import injected_inventory

            injected_inventory()  # a malformed value is bad input before anything starts, not a traceback later
        with command_signals():  # once the command takes its first interrupt, later signals only count
            return int(args._main(args))
    except HarnessError as exc:
        # Errors that already name their file and line (scenario problems) stand alone, one per line.
        for line in getattr(exc, "lines", None) or [f"sglang-repro: {exc}"]:
            print(_error_line(str(line)), file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # `sglang-repro list ... | head`: an OSError, so caught before the clause below
        _quiet_stdout()
        return 0
    except OSError as exc:
        # A full disk met by a writer with no clause of its own: one line, not a trace (pyarrow's has no errno).
        if exc.errno == errno.ENOSPC or "No space left on device" in str(exc):
            print(_printable(f"sglang-repro: {str(exc.filename or 'a file')[:200]}: no space left on the device"),
                  file=sys.stderr)
            return EXIT_INFRA
        # A path no file system can hold (a name over 255 bytes, a loop of links) met by a plain stat():
        # the user's input, not a bug; anything else is one and keeps its traceback.
        if exc.errno not in (errno.ENAMETOOLONG, errno.ELOOP):
            raise
        print(_printable(f"sglang-repro: {str(exc.filename)[:200]}: {exc.strerror}"), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _refuse_undecodable(args: argparse.Namespace, argv: Sequence[str]) -> None:
    """A text value given as bytes that are not UTF-8 (``--label $'night\\xff'``: a lone surrogate once decoded) is
    bad input here, before the command runs: every writer downstream (the store, a fixture, a JSON record)
    would meet it as a UnicodeEncodeError after the work was done. Paths are ``Path`` values and keep their
    bytes; a value that is text is text."""
    for dest, value in vars(args).items():
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, str) and not dest.startswith("_"):
                flag = "--" + dest.replace("_", "-")
                flag = flag if any(a.split("=")[0] == flag for a in argv) else dest.replace("_", " ")
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError as exc:
                    raise UserError(f"{flag}: byte {exc.start} is not UTF-8 text; give the value as UTF-8") from None
                if len(item) > _MAX_TEXT_VALUE:
                    # a 4,300-digit version was a ValueError traceback from int() in releases, contract, triage and
                    # bisect (which had created its report folder first): no text value of this CLI is that long
                    raise UserError(f"{flag}: {len(item)} characters, over the {_MAX_TEXT_VALUE} a value may have")


_MAX_TEXT_VALUE = 4096  # characters of one text value on the command line (paths are Path values, bounded by the OS)
_MAX_ERROR_LINE = 1000  # characters: an error names a file, a line and a field, not a whole value (a 15 KB `rules=`)


def _error_line(line: str) -> str:
    """The one shape of an error line on stderr: its secrets redacted (a `--set hardware.gpus=hf_...` was quoted back
    twice), its control characters shown, not sent, and its length bounded."""
    from harness.util.redact import redact_everywhere

    line = _printable(redact_everywhere(line))
    if len(line) > _MAX_ERROR_LINE:
        line = f"{line[:_MAX_ERROR_LINE]}... ({len(line) - _MAX_ERROR_LINE} more characters)"
    return line


def _printable(line: str) -> str:
    """One error line as it may reach a terminal: a file name's newline cannot forge a second
    ``FILE:1:1:`` line, nor its escape sequences repaint the screen (each is shown as ``\\n``, ``\\x1b``)."""
    if line.isprintable():
        return line
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)


def _quiet_stdout() -> None:
    """The reader of stdout is gone: what is still buffered goes nowhere, not into a second BrokenPipeError
    (with its "Exception ignored" trace) when the interpreter flushes at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def entry() -> NoReturn:
    """The process's entry point (the ``sglang-repro`` script, ``python -m harness``): ``main``, then an exit
    that a late signal cannot turn into a death by signal.

    Once ``main`` returns, the command has torn down and written what it writes. Python's finalization
    resets every Python-level signal handler to SIG_DFL (``_PySignal_Fini``), so a second Ctrl-C landing in
    that window killed the process with -SIGINT instead of the exit code the command had already decided
    (seen under load as exit -2 after an interrupted nightly had written its record). From here a signal
    ends the process at once with that code while threads are joined and exit handlers run, and is ignored
    for the last, bounded stretch: module teardown, which runs no harness code.
    """
    # Exit handlers run last-registered first: registered before the command imports its libraries, this
    # one runs after theirs (logging's flush and the rest), which still have the exit-at-once handler.
    atexit.register(_ignore_late_signals)
    command = find(_named_command(sys.argv[1:]) or "")
    reads_only = command is not None and command.reads_only
    if reads_only:
        # What such a command reads it keeps until it exits (validate: every file's models), so a pass of the cyclic
        # collector walks all of it and frees nothing: the one after load_paths' pause was a tenth of validating
        # 600 files. Reference counting still frees what it drops; the process ends with the command.
        gc.disable()
    code = main()
    if reads_only:
        # The interpreter's exit ends with a full collection, a walk over every object still alive (the
        # modules, pydantic's schemas, what the command read): an eighth of `validate` over 600 files. A
        # command that wrote nothing has no buffered file or child in a cycle for it to finalise.
        gc.freeze()

    def done(signum: int, frame: object) -> None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed pipe is no reason to die by the signal after all
                stream.flush()
        os._exit(code)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, done)
    raise SystemExit(code)


def _ignore_late_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
