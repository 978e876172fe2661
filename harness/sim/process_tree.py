"""SGLang's ``kill_process_tree(os.getpid())``, modelled: SIGKILL every child, then this process.

Both of SGLang's ways out of a running server end here (harness.contract.facts): the SIGTERM watchdog after its
drain (SIGTERM_SELF_KILL, up to 0.5.18) and either SIGQUIT handler after a child failed (CHILD_FAILED_SELF_KILL).
``include_parent`` defaults to True and the parent is the launcher itself, so psutil's kill (SIGKILL)
ends it: the wait status is -9 on both ways, never an exit code of its own. From 0.5.19 the SIGTERM watchdog
passes ``include_parent=False`` and then exits 0 (SIGTERM_CLEAN_EXIT): :func:`kill_children_and_exit`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from typing import TYPE_CHECKING, NoReturn

from harness.sim import SIM_LABEL

if TYPE_CHECKING:
    import psutil

__all__ = ["kill_children_and_exit", "kill_process_tree_and_self"]

logger = logging.getLogger("harness.sim.server")


def _kill_children(pid: int) -> list[psutil.Process]:
    import psutil

    killed: list[psutil.Process] = []
    for child in psutil.Process(pid).children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
            killed.append(child)
    return killed


def kill_process_tree_and_self() -> NoReturn:
    """SIGKILL every child (multiprocessing's resource tracker too), then this process."""
    pid = os.getpid()
    logger.info("kill_process_tree called: parent_pid=%d, include_parent=True, pid=%d %s", pid, pid, SIM_LABEL)
    logging.shutdown()  # the log is the record of this path; SGLang's kill does not wait for it, the sim does
    _kill_children(pid)
    os.kill(pid, signal.SIGKILL)
    raise AssertionError("unreachable: SIGKILL of this process returned")  # pragma: no cover


def kill_children_and_exit(code: int, wait_s: float = 60.0) -> NoReturn:
    """SGLang 0.5.19's ``kill_process_tree(os.getpid(), include_parent=False, wait_timeout=60)`` then
    ``sys.exit(0)``: SIGKILL every child, wait until they are reaped, and end this process with ``code``."""
    import psutil

    pid = os.getpid()
    logger.info("kill_process_tree called: parent_pid=%d, include_parent=False, pid=%d %s", pid, pid, SIM_LABEL)
    psutil.wait_procs(_kill_children(pid), timeout=wait_s)
    logging.shutdown()
    # os._exit, not sys.exit: the event loop's tasks and aiohttp's cleanup have nothing left to serve, and a
    # SystemExit raised in a task would be reported as the task's error before it ended the loop.
    os._exit(code)
