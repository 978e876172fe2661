"""SGLang's ``kill_process_tree(os.getpid())``, modelled: SIGKILL every child, then this process.

Both of SGLang's ways out of a running server end here (harness.contract.facts): the SIGTERM watchdog after its
drain (SIGTERM_SELF_KILL) and either SIGQUIT handler after a child failed (CHILD_FAILED_SELF_KILL).
``include_parent`` defaults to True and the parent is the launcher itself, so psutil's kill (SIGKILL)
ends it: the wait status is -9 on both ways, never an exit code of its own.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from typing import NoReturn

from harness.sim import SIM_LABEL

__all__ = ["kill_process_tree_and_self"]

logger = logging.getLogger("harness.sim.server")


def kill_process_tree_and_self() -> NoReturn:
    """SIGKILL every child (multiprocessing's resource tracker too), then this process."""
    import psutil

    pid = os.getpid()
    logger.info("kill_process_tree called: parent_pid=%d, include_parent=True, pid=%d %s", pid, pid, SIM_LABEL)
    logging.shutdown()  # the log is the record of this path; SGLang's kill does not wait for it, the sim does
    for child in psutil.Process(pid).children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    os.kill(pid, signal.SIGKILL)
    raise AssertionError("unreachable: SIGKILL of this process returned")  # pragma: no cover
