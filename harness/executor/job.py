"""One executor job: one case x one build x one trial, run as ``run`` runs it, wherever it lands.

The job carries names, not objects (the scenario's file and case name, the build spec): a SLURM job
starts in a fresh interpreter on some node, loads the scenario there, resolves the build there, and
runs with the GPUs the scheduler gave it. With a server store (PostgreSQL) the job writes its own
record, so a result survives a submitter that died; it also hands the record back, and the submitter's
write of it is a no-op (a run id is recorded once).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.records.run_record import RunRecord
from harness.scenario import Case
from harness.scenario.model import Hardware
from harness.store.store import Batch
from harness.util.interrupts import sigterm_as_ctrl_c

__all__ = ["PlannedCase", "RunJob", "execute_job", "gpus_from_env", "jobs_for", "run_job"]


@dataclass(frozen=True)
class PlannedCase:
    """One case a command plans to run and the build it runs: a spec, and the scenario role it came from, if
    any. The same record whether the runs stay on this machine (nightly) or become jobs (``jobs_for``)."""

    case: Case
    spec: str
    role: str | None = None


@dataclass(frozen=True)
class RunJob:
    """What one job runs, by name; picklable (it travels to the node)."""

    scenario_file: str  # absolute: the job's working folder is not the submitter's
    case: str
    spec: str
    role: str | None
    trial: int
    out_root: str  # a folder every node sees (artifacts land there)
    hardware: Hardware  # what the job asks the scheduler for
    deadline_s: float  # the scenario's own bound on one run
    store: str | None = None  # a server store the job records into itself; None: the submitter records
    batch: Batch | None = None

    @property
    def label(self) -> str:
        role = f" {self.role}" if self.role else ""
        return f"{Path(self.scenario_file).stem} [{self.case}]{role} trial {self.trial}"


def gpus_from_env(environ: dict[str, str] | None = None) -> tuple[int, ...] | None:
    """The GPUs SLURM gave the job (``CUDA_VISIBLE_DEVICES``, as gres sets it), or None when it names none."""
    env = os.environ if environ is None else environ
    text = (env.get("CUDA_VISIBLE_DEVICES") or "").strip()
    if not text:
        return None
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:  # UUIDs or MIG names: leave the variable as it is, lease nothing
        return None


def run_job(job: RunJob) -> RunRecord:
    """Run the job's case once (inside the job) and return its record; records it when it has a store.

    A run stopped by SIGTERM (``scancel``, the time limit) raises :class:`harness.pipeline.RunInterrupted`
    after tearing its server down: the submitter turns the job into an ``infra`` record with SLURM's
    reason, so nothing of the interrupted run is recorded as a result here.
    """
    # submitit's USR2 handler (sent before the time limit) would requeue or raise at any point of the run;
    # the run ends on SLURM's own SIGTERM instead, which tears the server down in order.
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    # submitit only logs a SIGTERM (its "bypass" handler), so one that came while the job was still resolving
    # its build, before the run installs its own, was lost: the run went on, passed within SLURM's KillWait and
    # recorded a result beside the submitter's infra record for the same cancelled trial.
    with sigterm_as_ctrl_c():
        return execute_job(job, handed_back=_job_folder_here())


def _job_folder_here() -> Path | None:
    """This SLURM job's submitit folder (the submitter's ``job.paths.folder``); None outside a job."""
    try:
        import submitit

        return Path(submitit.JobEnvironment().paths.folder)
    except Exception:  # not inside a submitit job (a test calling run_job directly): nothing to hand back to
        return None


# The record a job's run produced, written into its submitit folder before the store sees it: a job that SLURM
# ends after its run is over (the time limit reached while the job exits, a scancel then) has still run its
# trial, and the submitter takes that record, as the store has it, instead of adding an infra one beside it.
HANDED_BACK = "handed-back.json"


def handed_back(folder: Path) -> RunRecord | None:
    """The record a job wrote into ``folder`` (:data:`HANDED_BACK`) before it ended; None if it wrote none."""
    from harness.records.run_record import read_record
    from harness.util.errors import UserError

    path = folder / HANDED_BACK
    if not path.is_file():
        return None
    try:
        return read_record(path)
    except UserError:  # half a file cannot be: it is replaced whole; anything else is no record
        return None


def execute_job(job: RunJob, *, handed_back: Path | None = None) -> RunRecord:
    """The run of ``job`` in this process (the local executor calls this directly); with ``handed_back``
    (a SLURM job's folder) its record is written there before it goes into the store."""
    from harness.build import Builds
    from harness.pipeline import RunOptions, execute_run, resolve_for
    from harness.scenario import load_file, select_cases
    from harness.store.writer import record_run

    loaded = load_file(Path(job.scenario_file))
    (case,) = [c for c in select_cases(loaded, job.case) if c.name == job.case]
    build = resolve_for(case, job.spec, Builds())
    options = RunOptions(out_root=Path(job.out_root), progress=False, gpus=gpus_from_env())
    record = execute_run(case, build, role=job.role, trial=job.trial, options=options)
    if handed_back is not None:
        from harness.records.artifacts import write_json
        from harness.records.run_record import record_to_dict

        write_json(handed_back / HANDED_BACK, record_to_dict(record))
    if job.store is not None:
        record_run(job.store, record, batch=job.batch)
    return record


def jobs_for(planned: Sequence[PlannedCase], trials: int | None, out_root: Path, *,
             store: str | None = None, batch: Batch | None = None) -> list[RunJob]:
    """One job per (case, build spec, role) and trial, trials first within a case (as ``run`` orders them)."""
    jobs = []
    for p in planned:
        case = p.case
        for trial in range(trials or case.scenario.workload.trials):
            jobs.append(RunJob(scenario_file=str(Path(case.file).resolve()), case=case.name, spec=p.spec, role=p.role,
                               trial=trial, out_root=str(out_root.resolve()), hardware=case.scenario.hardware,
                               deadline_s=float(case.scenario.timeouts.scenario_s), store=store, batch=batch))
    return jobs
