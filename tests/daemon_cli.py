"""The ``start|stop DIR`` command line of the test daemons (``tests.store._postgres``, ``tests.slurm._cluster``):
``.ci/run`` starts them before the tests and stops them after, through this one entry."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["daemon_main"]


def daemon_main(start: Callable[[Path], str], stop: Callable[[Path], None], argv: Sequence[str]) -> None:
    """``start DIR`` prints what ``start`` returns (the URL or file clients need); ``stop DIR`` stops it;
    anything else exits with the usage line."""
    if len(argv) != 3 or argv[1] not in ("start", "stop"):
        sys.exit(f"usage: {argv[0] if argv else 'daemon'} start|stop DIR")
    folder = Path(argv[2])
    if argv[1] == "start":
        print(start(folder))
    else:
        stop(folder)
