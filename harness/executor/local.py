"""The local executor: the jobs run one after another in this process, as ``run`` runs them today."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from harness.executor.job import RunJob, execute_job
from harness.records.run_record import RunRecord

__all__ = ["LocalExecutor"]


class LocalExecutor:
    name = "local"

    def run_all(self, jobs: Sequence[RunJob], on_record: Callable[[RunRecord], None] | None = None) -> list[RunRecord]:
        """Each job's record in order; a run stopped by a signal raises ``RunInterrupted`` (its record written)."""
        records = []
        for job in jobs:
            record = execute_job(job)
            records.append(record)
            if on_record:
                on_record(record)
        return records
