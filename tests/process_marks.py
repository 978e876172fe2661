"""Finding the processes one test started: the test sets ``MARK_VAR`` to a value of its own in the harness's
environment, which every process the harness starts inherits (git, servers, watchdogs, guards), so a test
finds its own leftovers and never another test's running beside it."""

from __future__ import annotations

import psutil

__all__ = ["MARK_VAR", "marked"]

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
