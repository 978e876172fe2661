"""Where runs execute: ``local`` (this machine, one after another) or ``slurm`` (one SLURM job per run).

Both take the same :class:`RunJob` list (one case x build x trial each, by name) and return the same
records, so a command's review and report do not know where its runs went. The SLURM executor needs a
store every job can reach (PostgreSQL) and an output folder every node sees; see
:func:`harness.executor.options.slurm_store`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from harness.executor.job import PlannedCase, RunJob, execute_job, jobs_for, run_job
from harness.records.run_record import RunRecord

__all__ = ["Executor", "PlannedCase", "RunJob", "execute_job", "jobs_for", "run_job"]


class Executor(Protocol):
    """Runs jobs somewhere and blocks until each has a record (``on_record`` sees each as it arrives)."""

    name: str

    def run_all(self, jobs: Sequence[RunJob], on_record: Callable[[RunRecord], None] | None = None) -> list[RunRecord]:
        ...
