"""The one place the harness sends a signal to end processes; every other module asks here.

Ending processes had grown six spellings (a timed-out child command, a bisection's ``git bisect run``, a fleet
probe, a server's hurried teardown, the reaper, the guards' handshake), each with its own idea of which errors
mean "already gone" and whether the harness's own group may be hit. Here, once:

- :func:`signal_group` / :func:`signal_process`: one signal, "gone" and "not ours" (``ESRCH``, ``EPERM``) are
  not errors, and never process group 0/1 or the harness's own group (a pgid read off a dead child can be
  reused; killing our own group would end the harness);
- :func:`end_group`: TERM, a grace, then KILL, of one process group, each wait bounded;
- :func:`end_child`: the same for a direct child (a ``Popen``), reaped;
- :func:`dies_with_parent`: a child the kernel SIGKILLs when the thread that started it ends, so a harness (or a
  test) killed without a chance to clean up leaves no server behind;
- :func:`release_watcher`: the disarm handshake of a watcher process (the reaper's watchdog, a bisection's
  guard): close its pipe once it was told ``disarm``, wait a bounded time, KILL it if it does not go.

Killing every process of a *run* (its group and the escapees found by their tag) is
:func:`harness.server.reaper.kill_run`, built on these.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable

from harness.util.errors import EXIT_FAIL

__all__ = ["dies_with_parent", "end_child", "end_group", "group_alive", "release_watcher", "signal_group",
           "signal_process"]

_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[..., int] | None:
    # Resolved in the parent: the child between fork and exec should do as little as possible.
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name or "libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_prctl = _load_prctl()


def dies_with_parent(parent_pid: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel SIGKILL the child when the thread that forked it ends (Linux
    ``PR_SET_PDEATHSIG``), even by SIGKILL; None where that cannot be had (no prctl, or not the main thread)."""
    # The signal fires when the forking *thread* ends; from a pool thread that would kill a healthy server
    # when the pool retires the thread, so there only the watchdog guards against a dead harness.
    if _prctl is None or threading.current_thread() is not threading.main_thread():
        return None
    prctl = _prctl

    def setup() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(EXIT_FAIL)

    return setup


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to process group ``pgid``; False when it is gone, not ours, or a group never to signal."""
    if pgid <= 1 or pgid == os.getpgrp():
        return False
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def signal_process(pid: int, sig: int) -> bool:
    """Send ``sig`` to one process; False when it is gone or not ours (never pid 0, 1 or this process)."""
    if pid <= 1 or pid == os.getpid():
        return False
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is left (signal 0 probes without sending)."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def end_group(pgid: int, *, grace_s: float = 5.0, poll_s: float = 0.05) -> None:
    """TERM process group ``pgid``, wait up to ``grace_s`` for it to go, then KILL it and wait as long again."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not signal_group(pgid, sig):
            return
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if not group_alive(pgid):
                return
            time.sleep(poll_s)


def end_child(proc: subprocess.Popen[bytes] | subprocess.Popen[str], *, grace_s: float,
              kill_wait_s: float = 10.0) -> None:
    """TERM a direct child, wait up to ``grace_s``, KILL it if it is still there; it is reaped either way."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(timeout=kill_wait_s)


def release_watcher(proc: subprocess.Popen[bytes], *, timeout_s: float) -> None:
    """The end of a watcher that has been told ``disarm``: close its pipe (end of file is its cue if the line
    was lost), wait up to ``timeout_s``, KILL it if it hangs on."""
    if proc.stdin is not None:
        with contextlib.suppress(BrokenPipeError, OSError):
            proc.stdin.close()
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout_s)
