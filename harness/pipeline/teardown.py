"""The teardown phase: the server stopped (TERM, grace, KILL of its group; port and GPU memory released), its
report kept as it is (:class:`harness.records.run_record.TeardownInfo`).
"""

from __future__ import annotations

from harness.pipeline.stages import Trail
from harness.records.run_record import TeardownInfo
from harness.server.process import ServerProcess

__all__ = ["teardown"]


def teardown(server: ServerProcess, trail: Trail, *, judged: bool) -> TeardownInfo:
    """The server stopped. A signal during the stop is raised once the stop is done (ServerProcess.stop); after
    a finished workload it ends the command, not the run: the verdict the run reached is kept (issue 37: two
    Ctrl-Cs in a passing nightly run's teardown made its pass ``interrupted``), and ``execute_run`` raises
    RunInterrupted with that record."""
    try:
        return server.stop()
    except KeyboardInterrupt:
        if not judged:
            raise
        trail.signals_after_judged += 1
        return server.stop()  # idempotent: the report of the stop just done
