"""A SLURM job body for the executor's tests: the job's run, then a process that does not exit, as a job's
does when its time limit (or a scancel) reaches it after the run has written its record."""

from __future__ import annotations

import time

from harness.executor.job import RunJob, _job_folder_here, execute_job
from harness.records.run_record import RunRecord


def run_then_linger(job: RunJob) -> RunRecord:
    record = execute_job(job, handed_back=_job_folder_here())
    time.sleep(600)  # SLURM ends the job here
    return record
