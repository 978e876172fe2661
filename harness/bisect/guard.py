"""``python -m harness.bisect.guard``: ends a bisection's processes and removes its worktree if the harness dies.

It holds the read end of a pipe whose write end only the harness has. Lines: ``pgid N`` (the
``git bisect run`` process group), ``disarm`` (the harness cleaned up itself; exit quietly). End of
file without ``disarm`` means the harness is gone, even by SIGKILL: TERM then KILL the groups and
every process tagged ``SGLANG_REPRO_RUN=<tag>`` (each run's own watchdog then reaps its server), then
remove the temporary clone (the user's repository holds nothing of the search).
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.bisect.worktree import remove_tree
from harness.server.reaper import kill_run, read_watch_pipe

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.bisect.guard", description=__doc__.splitlines()[0])
    parser.add_argument("--tag", required=True)
    parser.add_argument("--repo", required=True, type=Path)
    parser.add_argument("--tree", required=True, type=Path)
    args = parser.parse_args(argv)
    # Ctrl-C and hang-ups belong to the harness; this process must outlive it to do its job.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    pgids = read_watch_pipe(sys.stdin.buffer)
    if pgids is None:
        return 0
    kill_run(args.tag, pgids, grace_s=3.0, kill_wait_s=2.0)
    remove_tree(args.tree)  # a clone: nothing of the search is in the user's repository
    return 0


if __name__ == "__main__":
    sys.exit(main())
