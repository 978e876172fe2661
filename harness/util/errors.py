"""One exception tree for the harness, translated to exit codes at the CLI edge."""

from __future__ import annotations

__all__ = ["HarnessError", "UserError", "InfraError", "disk_full", "EXIT_OK", "EXIT_FAIL", "EXIT_USAGE", "EXIT_INFRA",
           "EXIT_KNOWN_BUG", "EXIT_BISECT_SKIP", "EXIT_BISECT_ABORT", "EXIT_INTERRUPTED"]

# Every exit code the harness gives, named once (tests/test_code_shape.py keeps them here; design.md, "Contracts").

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_USAGE = 2
EXIT_INFRA = 3
# `issue`: the finding is a known bug (a build that lacks its recorded fix, a known open issue, or an
# infrastructure signature), so no upstream report was written (`--force` writes it).
EXIT_KNOWN_BUG = 4
# The step a `git bisect run` calls answers in git's own codes (git-bisect(1)): 0 old, 1 new, 125 this revision
# cannot be tested (skip), above 127 stop the bisection.
EXIT_BISECT_SKIP = 125
EXIT_BISECT_ABORT = 128
# Ctrl-C before a command has a record to keep (while the CLI imports, or a minimize that wrote nothing): 128 + SIGINT,
# as a shell reports it. A command that kept what it finished says 3 instead (design.md).
EXIT_INTERRUPTED = 130


class HarnessError(Exception):
    """Base of every error the harness raises on purpose."""

    exit_code = EXIT_FAIL


class UserError(HarnessError):
    """Bad input (a scenario file, a flag, a build spec): one line, exit 2, nothing started."""

    exit_code = EXIT_USAGE


class InfraError(HarnessError):
    """The harness could not even try: missing environment, model, hardware, port. Exit 3."""

    exit_code = EXIT_INFRA


def disk_full(exc: BaseException) -> bool:
    """A write that failed for want of room (pyarrow's error carries no errno, only the text)."""
    import errno

    return isinstance(exc, OSError) and (exc.errno in (errno.ENOSPC, errno.EDQUOT)
                                         or "No space left on device" in str(exc))
