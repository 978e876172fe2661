"""Finding the processes one test started: the test sets ``MARK_VAR`` to a value of its own in the harness's
environment, which every process the harness starts inherits (git, servers, watchdogs, guards), so a test
finds its own leftovers and never another test's running beside it."""

from __future__ import annotations

import psutil

__all__ = ["MARK_VAR", "alive", "command_line", "marked"]

MARK_VAR = "SGLANG_REPRO_TEST_MARK"


def marked(mark: str) -> list[psutil.Process]:
    """Live processes (not zombies) whose environment carries ``MARK_VAR=mark``."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get(MARK_VAR) == mark:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def command_line(proc: psutil.Process) -> str:
    """The process's command line, or "" once it has exited: a short-lived child (an interpreter probe, a
    git call) met while polling a tree may be a zombie or gone by the time it is read."""
    try:
        return " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return ""


def alive(proc: psutil.Process | int) -> bool:
    """The process still runs (not a zombie): False once it is gone, also when it goes while being asked."""
    try:
        return (proc if isinstance(proc, psutil.Process) else psutil.Process(proc)).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
