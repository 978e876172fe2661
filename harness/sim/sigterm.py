"""SGLang's SIGTERM path, modelled: log it, drain the open requests, stop the scheduler, end the tree.

The words are in ``harness.sim.sglang_words`` (SIGTERM_*), each with its line in 0.5.14 and 0.5.15. Once the
front has taken its first request (SGLang's tokenizer manager installs its handler then), SIGTERM only
sets a flag; a watchdog notices it, waits while requests remain (a client that went away is aborted by
the request's own disconnect check, ``harness.sim.http_api``), asks the scheduler to exit and waits for
it (bounded as SGLang's), then SIGKILLs what is left and itself (wait status -9, SGLang up to 0.5.18) or, with
``--sim-rules`` 0.5.19 or later, only its children and exits 0 (SGLang from 0.5.19); either way the harness's
teardown report shows that it killed nothing. The drain has no bound of its own, as in SGLang: the
harness's grace bounds it.

One change from SGLang, in time only: SGLang looks at the flag every SIGTERM_POLL_S (5 s), the sim every
:data:`SIM_POLL_S`, so a reference server's teardown is not 0-5 s longer for every test run; the harness's
5 s grace is at or below SGLang's own poll, which the README says for real builds.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING

from harness.sim.process_tree import kill_children_and_exit, kill_process_tree_and_self
from harness.sim.release_rules import DEFAULT_RULES, ReleaseRules
from harness.sim.sglang_words import (
    SIGTERM_CLEAN_EXIT,
    SIGTERM_DRAIN_LINE,
    SIGTERM_FORCE_ENV,
    SIGTERM_LINE,
    SIGTERM_SCHEDULER_WAIT_S,
)

if TYPE_CHECKING:
    from harness.sim.scheduler_client import SchedulerClient

__all__ = ["SIM_POLL_S", "SigtermWatchdog"]

logger = logging.getLogger("harness.sim.server")

SIM_POLL_S = 0.1


def _force_shutdown() -> bool:
    # SGLang's get_bool_env_var: "true" or "1", case-insensitive.
    return os.environ.get(SIGTERM_FORCE_ENV, "false").lower() in ("true", "1")


class SigtermWatchdog:
    """SGLang's ``SignalHandler.sigterm_handler`` plus ``TokenizerManager.sigterm_watchdog``."""

    def __init__(self, client: SchedulerClient, rules: ReleaseRules = DEFAULT_RULES) -> None:
        self.client = client
        self.rules = rules
        self.gracefully_exit = asyncio.Event()

    def on_sigterm(self) -> None:
        # loop.add_signal_handler calls it with no arguments, so SGLang logs signum=None frame=None.
        logger.warning("SIGTERM received. signum=None frame=None. %s", SIGTERM_LINE)
        self.gracefully_exit.set()

    async def run(self) -> None:
        await self.gracefully_exit.wait()
        logged = None
        while not _force_shutdown():
            rids = self.client.open_rids()
            if len(rids) != logged:  # SGLang logs each look (every 5 s); the sim each change, not 10 lines a second
                logger.info("%s %d. Remaining requests remaining_rids=%r.", SIGTERM_DRAIN_LINE, len(rids), rids)
                logged = len(rids)
            if not rids:
                break
            await asyncio.sleep(SIM_POLL_S)
        if _force_shutdown():
            logger.error("Signal SIGTERM received while force shutdown flag set. Force exiting.")
        self.client.shutdown(grace_s=SIGTERM_SCHEDULER_WAIT_S)
        if self.rules.sigterm_exit == SIGTERM_CLEAN_EXIT:
            kill_children_and_exit(SIGTERM_CLEAN_EXIT)
        kill_process_tree_and_self()
