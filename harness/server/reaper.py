"""Killing everything that belongs to one run, and a watchdog that does it if the harness dies.

A run's processes are found two ways: the server's process group, and every process whose initial
environment carries ``SGLANG_REPRO_RUN=<run id>``. The second catches children that left the group with
``setsid`` and were re-parented to PID 1, which upstream's ``kill_process_tree`` misses (sglang #31645).

The watchdog (``python -m harness.server.reaper --tag RUN``) runs in its own session and holds the read end of a
pipe whose write end only the harness has. Commands arrive as lines: ``pgid N`` adds a process group,
``disarm`` ends it quietly. End of file without ``disarm`` means the harness is gone (even by SIGKILL): the
watchdog TERMs, then KILLs, the run's processes and exits.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from harness.util.bounded_read import ReadRefused, read_bytes
from harness.util.kill import release_watcher, signal_group, signal_process

__all__ = ["TAG_VAR", "KillResult", "run_pids", "kill_run", "read_watch_pipe", "Watchdog", "main"]

TAG_VAR = "SGLANG_REPRO_RUN"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KillResult:
    """What ``kill_run`` did. ``escaped`` are tagged processes found outside the process groups."""

    terminated: tuple[int, ...]
    killed: tuple[int, ...]
    escaped: tuple[int, ...]
    leftover: tuple[int, ...]


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, pgid) of a process, or None when it is gone."""
    try:
        raw = read_bytes(Path(f"/proc/{pid}/stat"), "kernel")
    except (OSError, ReadRefused):
        return None
    # The command name may contain spaces and parentheses; the fields after the last ')' are fixed.
    fields = raw[raw.rfind(b")") + 2 :].split()
    return fields[0].decode(), int(fields[2])


def _has_tag(pid: int, needle: bytes) -> bool:
    try:
        environ = read_bytes(Path(f"/proc/{pid}/environ"), "kernel")
    except (OSError, ReadRefused):  # gone, or another user's process
        return False
    return needle in environ.split(b"\0")


def run_pids(tag: str, pgids: Collection[int] = ()) -> dict[int, bool]:
    """Live processes of the run: pid -> whether it is in one of ``pgids`` (False: found by its tag only).

    Zombies are left out: they hold nothing and only their parent can remove them.
    """
    needle = f"{TAG_VAR}={tag}".encode()
    me = os.getpid()
    found: dict[int, bool] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if pid in (me, 1):
            continue
        stat = _stat(pid)
        if stat is None or stat[0] in ("Z", "X"):
            continue
        in_group = stat[1] in pgids
        if in_group or _has_tag(pid, needle):
            found[pid] = in_group
    return found


def _signal_all(pids: Collection[int], pgids: Collection[int], sig: int) -> None:
    for pgid in pgids:
        signal_group(pgid, sig)
    for pid in pids:
        signal_process(pid, sig)


def _wait_gone(tag: str, pgids: Collection[int], timeout_s: float) -> dict[int, bool]:
    deadline = time.monotonic() + timeout_s
    while True:
        alive = run_pids(tag, pgids)
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def kill_run(tag: str, pgids: Collection[int] = (), *, grace_s: float = 5.0, kill_wait_s: float = 2.0) -> KillResult:
    """TERM every process of the run, wait up to ``grace_s``, KILL the rest, wait up to ``kill_wait_s``."""
    first = run_pids(tag, pgids)
    escaped = {pid for pid, in_group in first.items() if not in_group}
    _signal_all(first, pgids, signal.SIGTERM)
    alive = _wait_gone(tag, pgids, grace_s) if first else {}
    killed: set[int] = set()
    # Loop because a process may fork between the scan and the signal.
    deadline = time.monotonic() + kill_wait_s
    while alive:
        escaped.update(pid for pid, in_group in alive.items() if not in_group)
        killed.update(alive)
        _signal_all(alive, pgids, signal.SIGKILL)
        alive = _wait_gone(tag, pgids, max(0.0, min(0.2, deadline - time.monotonic())))
        if time.monotonic() >= deadline:
            break
    if alive:
        log.error("run %s: processes survived SIGKILL: %s", tag, sorted(alive))
    return KillResult(
        terminated=tuple(sorted(first)),
        killed=tuple(sorted(killed)),
        escaped=tuple(sorted(escaped)),
        leftover=tuple(sorted(alive)),
    )


class Watchdog:
    """The harness's handle on a watchdog process. Start it before the server so no window is unguarded."""

    def __init__(self, tag: str, *, grace_s: float = 1.0) -> None:
        env = {k: v for k, v in os.environ.items() if k != TAG_VAR}  # never reap itself
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        env["PYTHONSAFEPATH"] = "1"  # the working directory's own harness/ (a user's repository) never shadows this one
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "harness.server.reaper", "--tag", tag, "--grace-s", str(grace_s)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # killing the server's group or the terminal's must not kill it
        )

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _send(self, line: str) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(line.encode() + b"\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            log.warning("reaper watchdog %d is gone; cannot send %r", self._proc.pid, line)

    def add_group(self, pgid: int) -> None:
        self._send(f"pgid {pgid}")

    def disarm(self, timeout_s: float = 5.0) -> None:
        """Stop the watchdog without it killing anything (the harness has torn down itself)."""
        if self._proc.poll() is None:
            self._send("disarm")
        release_watcher(self._proc, timeout_s=timeout_s)


def read_watch_pipe(stream: BinaryIO) -> set[int] | None:
    """Read a watcher's pipe until it closes: the process groups it was told about (``pgid N`` lines), or
    None when it was told ``disarm`` (the harness ended its run itself)."""
    pgids: set[int] = set()
    for raw in stream:
        words = raw.decode(errors="replace").split()
        if words == ["disarm"]:
            return None
        if len(words) == 2 and words[0] == "pgid" and words[1].isdigit():
            pgids.add(int(words[1]))
    return pgids


def _watch(tag: str, grace_s: float) -> int:
    pgids = read_watch_pipe(sys.stdin.buffer)
    if pgids is None:
        return 0
    result = kill_run(tag, pgids, grace_s=grace_s, kill_wait_s=1.0)
    log.warning("harness gone; reaped run %s: %s", tag, result)
    return 0 if not result.leftover else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.server.reaper", description=__doc__.splitlines()[0])
    parser.add_argument("--tag", required=True, help=f"run id carried as {TAG_VAR}=<tag>")
    parser.add_argument("--grace-s", type=float, default=1.0, help="seconds between TERM and KILL")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="reaper: %(message)s")
    # Ctrl-C and hang-ups belong to the harness; this process must outlive it to do its job.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    return _watch(args.tag, args.grace_s)


if __name__ == "__main__":
    sys.exit(main())
