"""The SLURM executor: each run job becomes one SLURM job, submitted and tracked with submitit.

submitit writes the sbatch script, pickles the call, submits (one array per group of jobs that ask
for the same resources), and reads states with ``sacct``; the harness never parses sbatch's text.
A job asks for what its scenario's ``hardware`` says: ``--gres=gpu[:TYPE]:N``, TYPE from
``hardware.gpu_name`` through ``gpu_types`` (a cluster that names its GPU types; none: ``gpu:N``).

A job that did not hand a record back, because SLURM killed it (time limit, preemption, node failure,
``scancel``) or it failed, becomes an ``infra`` record carrying SLURM's state (e.g. ``TIMEOUT``,
``CANCELLED by 0``) and pointing at the job's folder (its stdout/stderr, where slurmstepd writes why):
never a lost result. Ctrl-C of the submitter cancels every job it still has queued or running.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.build.spec import parse_build_spec
from harness.executor.job import RunJob, handed_back, run_job
from harness.records.artifacts import write_record
from harness.records.outcome import Outcome
from harness.records.run_record import BuildRef, CaseRef, HostInfo, RunRecord, ScenarioRef, ServerInfo
from harness.scenario.model import Hardware
from harness.util.clock import now_iso
from harness.util.errors import InfraError, UserError
from harness.util.interrupts import sigterm_as_ctrl_c, taken
from harness.util.proc import run_bounded
from harness.util.text import first_line
from harness.version import harness_version

__all__ = ["ExecutorInterrupted", "SlurmExecutor", "SlurmOptions", "gres_for"]

# A job in any other state will not run again (submitit counts PREEMPTED as not done: it may requeue). squeue's and
# scontrol's states count too: SIGNALING (a scancel or a time limit being delivered; the suite once recorded a
# cancelled job as "SIGNALING" under load, not "CANCELLED by 0") and STOPPED keep their allocation; the REQUEUE_*
# and hold states come back to the queue.
_RUNNING = ("RUNNING", "COMPLETING", "CONFIGURING", "STAGE_OUT", "SUSPENDED", "SIGNALING", "STOPPED")
_WAITING = ("PENDING", "REQUEUED", "RESIZING", "UNKNOWN", "READY", "", "REQUEUE_FED", "REQUEUE_HOLD",
            "RESV_DEL_HOLD", "SPECIAL_EXIT")


@dataclass(frozen=True)
class SlurmOptions:
    """What every job of one command asks SLURM for, besides its own hardware."""

    folder: Path  # submitit's job folders (scripts, pickles, logs): on storage every node sees
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_min: int | None = None  # None: from the scenario's deadline
    extra: Mapping[str, str] = field(default_factory=dict)  # --slurm-arg KEY=VALUE: sbatch's --KEY=VALUE
    gpu_types: Mapping[str, str] = field(default_factory=dict)  # hardware.gpu_name pattern -> gres type
    poll_s: float = 5.0


class ExecutorInterrupted(KeyboardInterrupt):
    """The submitter was interrupted: its jobs are cancelled; ``records`` holds every job's record (the
    unfinished ones ``infra``, cancelled)."""

    def __init__(self, records: Sequence[RunRecord]) -> None:
        super().__init__("interrupted: the SLURM jobs are cancelled")
        self.records = list(records)


def gres_for(hardware: Hardware, gpu_types: Mapping[str, str]) -> str | None:
    """``gpu[:TYPE]:N`` for ``hardware``, or None when it needs no GPU."""
    if not hardware.gpus:
        return None
    gpu_type = None
    if hardware.gpu_name:
        # The scenario's gpu_name is a pattern over NVML names ("H200", "L40S|L40"); the mapping names the
        # cluster's gres type for each pattern, by the same text.
        gpu_type = gpu_types.get(hardware.gpu_name)
        if gpu_type is None:
            gpu_type = next((t for pattern, t in gpu_types.items() if re.search(pattern, hardware.gpu_name, re.I)),
                            None)
    return f"gpu:{gpu_type}:{hardware.gpus}" if gpu_type else f"gpu:{hardware.gpus}"


def _time_min(deadline_s: float, options: SlurmOptions) -> int:
    if options.time_min is not None:
        return options.time_min
    # The scenario's own deadline bounds the run; SLURM's limit sits beyond it (model load, env build).
    return max(5, math.ceil(deadline_s / 60) + 10)


def _parameters(hardware: Hardware, deadline_s: float, options: SlurmOptions) -> dict[str, Any]:
    params: dict[str, Any] = {"time": _time_min(deadline_s, options), "job_name": "sglang-repro"}
    for key in ("partition", "account", "qos"):
        if getattr(options, key):
            params[key] = getattr(options, key)
    gres = gres_for(hardware, options.gpu_types)
    if gres:
        params["gres"] = gres
    if hardware.cpus is not None:
        params["cpus_per_task"] = hardware.cpus
    # submitit asks SLURM for USR2 90 s before the time limit (sent up to 60 s earlier still), to requeue or
    # checkpoint; with a short limit it arrives before the job's Python has a handler, and kills it with no
    # reason. SIGCONT in its place is harmless: the run ends on SLURM's own SIGTERM at the limit (TIMEOUT).
    # --mem in SLURM's own unit (whole MiB): submitit's "mem" writes a fraction as "NMB", which sbatch refuses
    # ("Invalid --mem specification", slurm 22.05); an extra --slurm-arg mem=... still wins.
    memory = {"mem": f"{math.ceil(hardware.host_memory_gib * 1024)}M"} if hardware.host_memory_gib else {}
    params["additional_parameters"] = {"signal": "CONT@30", **memory,
                                       **{k.replace("-", "_"): v for k, v in options.extra.items()}}
    return params


@dataclass
class _Tracked:
    job: Any  # a RunJob by default
    handle: Any  # submitit.Job
    state: str = "PENDING"
    record: Any = None  # what the job handed back (a RunRecord by default), or the executor's lost one
    unknown_since: float | None = None  # since when sacct cannot say (a cluster without accounting, or behind)
    ended_since: float | None = None  # when the job was first seen ended without sacct's whole word on it
    node: str = ""  # where it ran, as sacct said when asked for this job alone


# Without accounting (AccountingStorageType=accounting_storage/none, a small cluster's default) sacct answers
# "Slurm accounting storage is disabled" and submitit's watcher says UNKNOWN for ever. The job's state then
# comes from scontrol (while slurmctld remembers the job: MinJobAge, 300 s by default), squeue (while it is
# queued or running), and the job's own folder (submitit's result pickle, the handed-back record); a job none
# of them can place for longer than its time limit and this margin is lost, with that said.
_UNKNOWN_MARGIN_S = 600.0
# With accounting, sacct can still lag slurmctld, which queues a job's start and end for a busy or restarting
# slurmdbd. CI saw a scancelled job that sacct had not placed yet recorded with scontrol's bare "CANCELLED" (no
# "by UID", no node). And once slurmctld reconnects to slurmdbd it sends it the job again without its requester:
# here sacct then said "CANCELLED" for 12 s before "CANCELLED by 0" (tests/slurm/test_executor.py stops slurmdbd
# around a scancel). An ended job without a record waits this long for sacct's whole state, then takes what it has.
_SACCT_LAG_S = 90.0
_ASK_TIMEOUT_S = 30.0


def _ask(argv: list[str]) -> subprocess.CompletedProcess[str] | None:
    try:
        return run_bounded(argv, timeout=_ASK_TIMEOUT_S)
    except (OSError, InfraError):
        return None


def state_without_accounting(job_id: str, folder: Path, result_pickle: Path) -> str:
    """A job's state when sacct cannot say: scontrol's JobState, else squeue's, else what its folder shows
    (``COMPLETED`` with a result pickle or a handed-back record, ``ENDED`` when the queue no longer holds it),
    else ``UNKNOWN``."""
    shown = _ask(["scontrol", "show", "job", "-o", job_id])
    if shown is not None and shown.returncode == 0:
        found = re.search(r"\bJobState=(\S+)", shown.stdout)
        if found:
            return found.group(1).upper()
    queued = _ask(["squeue", "-h", "-j", job_id, "-o", "%T"])
    if queued is not None and queued.returncode == 0 and queued.stdout.strip():
        return queued.stdout.split()[0].upper()
    if result_pickle.exists() or handed_back(folder) is not None:
        return "COMPLETED"
    left = queued is not None and (queued.returncode == 0 or "invalid job id" in queued.stderr.lower())
    return "ENDED" if left else "UNKNOWN"  # squeue answered without it: the job has left the queue


def sacct_state(job_id: str) -> tuple[str, str] | None:
    """sacct's State and NodeList of one job's allocation, or None when sacct has no line for it."""
    shown = _ask(["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "State,NodeList"])
    if shown is None or shown.returncode != 0:
        return None
    for line in shown.stdout.splitlines():
        state, _, node = line.partition("|")
        if state.strip():
            return state.strip(), node.strip()
    return None


def cluster_has_accounting() -> bool:
    """Whether the cluster keeps accounting (``AccountingStorageType`` other than ``accounting_storage/none``,
    as ``scontrol show config`` says); False when scontrol cannot say."""
    shown = _ask(["scontrol", "show", "config"])
    if shown is None or shown.returncode != 0:
        return False
    found = re.search(r"^AccountingStorageType\s*=\s*(\S+)", shown.stdout, re.MULTILINE)
    return found is not None and found.group(1) != "accounting_storage/none"


def _lost_run(job: RunJob, reason: str, folder: Path, interrupted: bool) -> RunRecord:
    return lost_record(job, reason, folder, outcome=Outcome.INTERRUPTED if interrupted else Outcome.INFRA)


class SlurmExecutor:
    """Runs jobs on SLURM; ``run_all`` blocks until every job has a record.

    A job is a :class:`RunJob` run by :func:`run_job` by default; another caller (a bisection's probe of one
    revision) gives its own picklable job type (with ``hardware``, ``deadline_s``), the function run inside
    the job, the type of what it returns, and ``lost`` (job, reason, folder, interrupted) for a job that
    handed nothing back."""

    name = "slurm"

    def __init__(self, options: SlurmOptions, *, call: Callable[[Any], Any] = run_job,
                 result_type: type = RunRecord, lost: Callable[[Any, str, Path, bool], Any] = _lost_run) -> None:
        self.options = options
        self._call = call
        self._result_type = result_type
        self._lost = lost
        self._accounting: bool | None = None  # asked once, the first time sacct has not placed an ended job

    def run_all(self, jobs: Sequence[RunJob], on_record: Callable[[RunRecord], None] | None = None) -> list[RunRecord]:
        """Submit ``jobs`` and wait; their records in the order of ``jobs`` (``on_record`` sees each as it
        arrives). Raises :class:`ExecutorInterrupted` on Ctrl-C, after cancelling the jobs."""
        return self.run_jobs(jobs, on_record)

    def run_jobs(self, jobs: Sequence[Any], on_record: Callable[[Any], None] | None = None) -> list[Any]:
        """``run_all`` for jobs of the executor's own ``call`` (their results, or ``lost`` ones)."""
        with sigterm_as_ctrl_c():  # a CI runner stopping the submitter cancels the jobs
            submitted: dict[int, Any] = {}
            try:
                tracked = self._submit(jobs, submitted)
            except KeyboardInterrupt:  # between two arrays: what was submitted already is cancelled too
                taken()
                tracked = [_Tracked(job, submitted[i]) for i, job in enumerate(jobs) if i in submitted]
                raise ExecutorInterrupted(self._cancel(tracked, on_record)) from None
            try:
                self._wait(tracked, on_record)
            except KeyboardInterrupt:
                taken()
                raise ExecutorInterrupted(self._cancel(tracked, on_record)) from None
        return [t.record for t in tracked if t.record is not None]

    # ------------------------------------------------------------------ submission

    def _submit(self, jobs: Sequence[RunJob], handles: dict[int, Any]) -> list[_Tracked]:
        import submitit

        if not jobs:
            return []
        groups: dict[str, list[int]] = {}
        params_of: dict[str, dict[str, Any]] = {}
        for i, job in enumerate(jobs):
            params = _parameters(job.hardware, job.deadline_s, self.options)
            key = repr(sorted(params.items()))
            groups.setdefault(key, []).append(i)
            params_of[key] = params
        self.options.folder.mkdir(parents=True, exist_ok=True)
        for key, indices in groups.items():
            executor = submitit.SlurmExecutor(folder=self.options.folder / "%j", max_num_timeout=0)
            try:
                executor.update_parameters(**params_of[key])
            except ValueError as exc:  # an unknown --slurm-arg, a bad value
                raise UserError(f"--executor slurm: {first_line(exc)}") from None
            # One array per group of equal requests (submitit's batch), single jobs alone.
            try:
                if len(indices) > 1:
                    with executor.batch():
                        subs = [executor.submit(self._call, jobs[i]) for i in indices]
                else:
                    subs = [executor.submit(self._call, jobs[indices[0]])]
            except (submitit.core.utils.FailedJobError, OSError) as exc:  # sbatch said no (partition, account...)
                for handle in handles.values():
                    handle.cancel(check=False)
                raise InfraError(f"--executor slurm: sbatch refused the jobs: {_last_line(exc)}") from None
            for i, sub in zip(indices, subs):
                handles[i] = sub
        tracked = [_Tracked(job, handles[i]) for i, job in enumerate(jobs)]
        _say(f"slurm: {len(tracked)} job(s) submitted: " + " ".join(str(t.handle.job_id) for t in tracked))
        return tracked

    # ------------------------------------------------------------------ waiting

    def _wait(self, tracked: list[_Tracked], on_record: Callable[[Any], None] | None) -> None:
        import submitit

        watcher = submitit.SlurmJob.watcher
        last = ""
        placed_without_sacct = False
        while any(t.record is None for t in tracked):
            watcher.update()  # one sacct call for every job of this command
            for t in tracked:
                if t.record is not None:
                    continue
                t.state = watcher.get_state(t.handle.job_id, mode="cache")
                base = t.state.split()[0].upper() if t.state else ""
                sacct_unsure = base == "UNKNOWN"
                if sacct_unsure:
                    t.state = state_without_accounting(str(t.handle.job_id), _job_folder(t),
                                                       Path(t.handle.paths.result_pickle))
                    base = t.state.split()[0].upper()
                    t.unknown_since = t.unknown_since or time.monotonic()
                else:  # sacct has placed it: its state and node count from here on
                    t.unknown_since = None
                if base == "UNKNOWN" and self._unknown_too_long(t):
                    t.state = f"UNKNOWN for {time.monotonic() - (t.unknown_since or 0):.0f} s"
                elif base in _RUNNING or base in _WAITING or self._sacct_may_catch_up(t, sacct_unsure):
                    continue
                sacct_unsure = t.unknown_since is not None  # asked alone, sacct may have placed it
                if sacct_unsure and not placed_without_sacct:  # once a command: how it knew
                    placed_without_sacct = True
                    if self._accounting is None:
                        self._accounting = cluster_has_accounting()
                    why = "yet (slurmdbd behind or down?)" if self._accounting else "(a cluster without accounting?)"
                    _say(f"slurm: job {t.handle.job_id} ended ({t.state}) by scontrol, squeue and its folder: sacct "
                         f"has no record of it {why}")
                t.record = self._finish(t)
                if on_record:
                    on_record(t.record)
            line = _progress(tracked)
            if line != last:
                _say(line)
                last = line
            if any(t.record is None for t in tracked):
                time.sleep(self.options.poll_s)

    def _sacct_may_catch_up(self, t: _Tracked, sacct_unsure: bool) -> bool:
        """Whether a job that ended without handing a record back waits for sacct's whole state (who cancelled it,
        where it ran): on a cluster with accounting, while sacct has no line for it or says a bare
        ``CANCELLED``, for at most ``_SACCT_LAG_S`` from when it was first seen ended. When sacct, asked about the
        job alone, has more, the job takes it (``state``, ``node``) and waits no longer."""
        placed_ended = sacct_unsure and t.state.split()[0].upper() != "COMPLETED"  # COMPLETED: its folder has it
        if not (placed_ended or t.state.upper() == "CANCELLED"):
            return False
        if self._result_type is RunRecord and handed_back(_job_folder(t)) is not None:
            return False  # the run's own record is taken, and SLURM's state is not in it
        if self._accounting is None:
            self._accounting = cluster_has_accounting()
        if not self._accounting:
            return False
        t.ended_since = t.ended_since or time.monotonic()
        # submitit's watcher stops asking sacct about a job once it holds an ended state for it: asked here alone.
        answer = sacct_state(str(t.handle.job_id))
        if answer is not None and answer[0].upper() != "CANCELLED":
            t.state, t.node, t.unknown_since = answer[0], answer[1], None
            return False
        return time.monotonic() - t.ended_since < _SACCT_LAG_S

    def _unknown_too_long(self, t: _Tracked) -> bool:
        """No source has placed the job for longer than its time limit and a margin: the wait ends."""
        limit_s = _time_min(t.job.deadline_s, self.options) * 60.0 + _UNKNOWN_MARGIN_S
        return t.unknown_since is not None and time.monotonic() - t.unknown_since > limit_s

    def _finish(self, t: _Tracked) -> Any:
        """The record of a job SLURM reports finished: its own, or ``infra`` with SLURM's reason."""
        job_id = t.handle.job_id
        base = t.state.split()[0].upper()
        result: Any = None
        # Without accounting submitit's result() waits for a pickle that a killed job never writes: asked only
        # once the pickle is there.
        answers = t.unknown_since is None or Path(t.handle.paths.result_pickle).exists()
        if base == "COMPLETED" and answers:
            try:
                result = t.handle.result()
            except Exception as exc:  # any failure to hand the record back is the job's infra
                result = exc
            if isinstance(result, self._result_type):
                return result
        # SLURM ended the job (or its result was lost) after its run had written its record, e.g. the time limit
        # reached as it exited: the trial ran and the store has its record; an infra record beside it would be a
        # second one for the same trial.
        done = handed_back(_job_folder(t)) if self._result_type is RunRecord else None
        if done is not None:
            return done
        if base in ("ENDED", "UNKNOWN") or (base == "COMPLETED" and not answers):
            return self._lost(t.job, f"slurm job {job_id} {t.state}: it left the queue without a record, and the "
                                     "cluster keeps no accounting to say why (see the job's folder)", _job_folder(t),
                              False)
        if isinstance(result, Exception):
            return self._lost(t.job, f"slurm job {job_id} completed without a record: {_last_line(result)}",
                              _job_folder(t), False)
        if base == "COMPLETED":
            return self._lost(t.job, f"slurm job {job_id} returned {type(result).__name__}, not a record",
                              _job_folder(t), False)
        if base == "FAILED":
            why = ""
            try:
                if answers:
                    t.handle.result()
            except Exception as exc:  # submitit re-raises the job's error with its traceback
                why = f": {_last_line(exc)}"
            return self._lost(t.job, f"slurm job {job_id} FAILED{why}", _job_folder(t), False)
        # TIMEOUT, CANCELLED by UID, PREEMPTED, NODE_FAIL, OUT_OF_MEMORY, DEADLINE, BOOT_FAIL: SLURM ended it.
        node = t.node or (t.handle.get_info(mode="cache").get("NodeList", "") if t.unknown_since is None else "")
        where = f" on {node}" if node and node != "None assigned" else ""
        return self._lost(t.job, f"slurm job {job_id} {t.state}{where}: SLURM ended the job before it handed "
                                 "back a record", _job_folder(t), False)

    def _cancel(self, tracked: list[_Tracked], on_record: Callable[[Any], None] | None) -> list[Any]:
        """Cancel every unfinished job (one scancel each, checked) and give each an ``infra`` record."""
        for t in tracked:
            if t.record is None and t.ended_since is not None:  # ended before the interrupt, waiting for sacct
                t.record = self._finish(t)
                if on_record:
                    on_record(t.record)
            elif t.record is None:
                try:
                    t.handle.cancel(check=True)
                except Exception as exc:  # report and go on cancelling the others
                    _say(f"slurm: could not cancel job {t.handle.job_id}: {first_line(exc)}")
                t.record = self._lost(t.job, f"slurm job {t.handle.job_id} cancelled: the submitter was "
                                             "interrupted (Ctrl-C)", _job_folder(t), True)
                if on_record:
                    on_record(t.record)
        _say("slurm: interrupted; every unfinished job is cancelled")
        return [t.record for t in tracked if t.record is not None]


def _job_folder(t: _Tracked) -> Path:
    return Path(t.handle.paths.folder)


def _last_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1][:300] if lines else type(exc).__name__


def _progress(tracked: Sequence[_Tracked]) -> str:
    counts = {"pending": 0, "running": 0, "done": 0}
    for t in tracked:
        base = t.state.split()[0].upper() if t.state else ""
        key = "done" if t.record is not None else ("running" if base in _RUNNING else "pending")
        counts[key] += 1
    running = [str(t.handle.job_id) for t in tracked if t.record is None and (t.state.split() or [""])[0] in _RUNNING]
    tail = f" (running: {' '.join(running)})" if running else ""
    return f"slurm: {len(tracked)} submitted, {counts['pending']} pending, {counts['running']} running, " \
           f"{counts['done']} done{tail}"


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def lost_record(job: RunJob, reason: str, folder: Path, *, outcome: Outcome = Outcome.INFRA) -> RunRecord:
    """The record of a job that produced none: ``infra`` (or ``interrupted``) with ``reason``, its artifacts
    the job's folder (SLURM's log of it), written there as ``result.json`` like every run's."""
    from harness.scenario import load_file

    try:
        name = load_file(Path(job.scenario_file)).scenario.name
    except Exception:  # the record must exist even if the file changed meanwhile
        name = Path(job.scenario_file).stem
    try:
        kind = parse_build_spec(job.spec).kind
    except UserError:
        kind = job.spec.partition(":")[0]
    values = dict(part.split("=", 1) for part in job.case.split(",") if "=" in part)
    folder.mkdir(parents=True, exist_ok=True)
    record = RunRecord(
        run_id=f"slurm-{folder.name}-{name[:40]}-{job.case}-{job.role or kind}-t{job.trial}",
        scenario=ScenarioRef(name=name, file=job.scenario_file),
        case=CaseRef(name=job.case, values=values),
        build=BuildRef(kind=kind, spec=job.spec, role=job.role, reference_server=kind == "sim"),
        trial=job.trial,
        outcome=outcome,
        signature=None,
        reason=reason,
        metrics={},
        server=ServerInfo(),
        host=HostInfo(),
        started_at=now_iso(),
        duration_s=0.0,
        harness_version=harness_version(),
        artifacts=str(folder),
    )
    write_record(folder, record)
    return record
