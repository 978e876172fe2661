"""A torch-free handle on the scheduler's entry point, so the front can spawn it without importing torch."""

from __future__ import annotations

from multiprocessing.connection import Connection

from harness.sim.server_settings import SchedulerSettings

__all__ = ["scheduler_main"]


def scheduler_main(settings: SchedulerSettings, inbox: Connection, out: Connection, parent_pid: int) -> None:
    from harness.sim.scheduler import run_scheduler_process  # torch is imported here, in the child only

    run_scheduler_process(settings, inbox, out, parent_pid)
