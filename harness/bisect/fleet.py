"""A bisection over commits with ``--jobs K``: K revisions of the remaining range judged at once, each one job.

The search is :mod:`harness.bisect.kary` (about log_(K+1) N rounds instead of log_2 N); each revision is
judged by the same :class:`~harness.bisect.probe.Probe` as a step of ``git bisect run`` (the same oracle,
known trials reused, skips), its endpoints by the same ``establish``, its culprit confirmed by the same
fresh trials. Only where a probe runs differs: a job (``python -m harness.bisect.fleet`` here, K at once,
or a SLURM job through :class:`~harness.executor.slurm.SlurmExecutor`).

Why builds by commit and not K worktrees: ``git bisect`` keeps one HEAD per worktree and picks the next
revision itself, one at a time; a round needs K trees at once, picked by the harness. Each job resolves
``simsrc:REPO@COMMIT`` (``src:REPO@COMMIT`` for an SGLang checkout) itself, and the build cache checks each
commit out once into its own file-locked linked worktree (:mod:`harness.build.checkouts`), shared by the
K jobs of a round, the confirmation, and later searches. Nothing of ``git bisect`` runs, so the user's
checkout (HEAD, index, ``refs/bisect``) never moves and a killed search leaves nothing to clean there, only
cache. On a fleet the repository and ``$SGLANG_REPRO_CACHE`` must sit on storage every node sees, as ``--out``.

The range is git's first-parent chain ``old..new``: the K-ary search needs a line whose answers are
monotone; on a history with merges the first new commit may be a merge (as ``git bisect --first-parent``).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from harness.bisect.endpoints import establish
from harness.bisect.kary import NEW, OLD, SKIP, expected_rounds, next_round, result_of
from harness.bisect.oracle import Find, Target, Trial, Verdict
from harness.bisect.probe import Probe, SearchState, StepRecord, experiment_key, load_case, progress
from harness.bisect.session import (
    CommitResult,
    Request,
    confirm_culprit,
    culprit_of,
    ordered_ends,
    record_endpoints,
    resolve_endpoints,
)
from harness.bisect.step import append_step, describe_commit, read_steps
from harness.bisect.worktree import PACKAGE_ROOT, layout_of
from harness.executor.slurm import SlurmExecutor, SlurmOptions
from harness.records.outcome import Outcome
from harness.scenario.model import Hardware
from harness.signatures.catalogue import Catalogue
from harness.util.atomic import write_atomic, write_atomic_bytes
from harness.util.bounded_read import read_bytes, read_text, tail_lines
from harness.util.errors import EXIT_FAIL, EXIT_INFRA, EXIT_USAGE, InfraError
from harness.util.kill import end_child
from harness.util.proc import git

__all__ = ["LocalProbes", "ProbeAnswer", "ProbeJob", "ProbeRunner", "SlurmProbes", "bisect_commits_kary",
           "probe_job"]

_JOB_GRACE_S = 20.0  # a probe stopped by SIGTERM tears its server down first
EXIT_ORACLE_FAILED = EXIT_INFRA


@dataclass(frozen=True)
class ProbeJob:
    """One revision's probe, by value (it is pickled into a job)."""

    state: SearchState
    store: str | None  # the store's full URL (``state.json`` never holds a password; the job's pickle does, as RunJob's)
    mode: str  # judge | trials | fresh
    kind: str  # the step record's kind: step | confirm | endpoint
    revision: str
    label: str
    spec: str
    hardware: Hardware  # what the job asks the scheduler for
    deadline_s: float  # a bound on the whole probe (trials x the scenario's own bound)
    index: int = 0
    n: int = 0  # trials (trials/fresh), or fresh trials of a confirmation (judge)

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.index}-{self.revision[:12]}"


@dataclass(frozen=True)
class ProbeAnswer:
    """What a probe job hands back: its step record (judge) or its trials."""

    revision: str
    step: StepRecord | None
    trials: tuple[Trial, ...]


def probe_job(job: ProbeJob) -> ProbeAnswer:
    """The probe of ``job`` in this process (inside a SLURM job, or ``python -m harness.bisect.fleet``)."""
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)  # as run_job: the run ends on SLURM's own SIGTERM
    state = replace(job.state, store=job.store)
    from harness.executor.job import gpus_from_env

    # Inside a SLURM job: the GPUs SLURM gave it (CUDA_VISIBLE_DEVICES), as run_job leases them.
    gpus = gpus_from_env() if os.environ.get("SLURM_JOB_ID") else None
    probe = Probe(state, load_case(Path(state.scenario), state.case), gpus=gpus)
    if job.mode == "judge":
        step = probe.judge(kind=job.kind, revision=job.revision, label=job.label, spec=job.spec,
                           fresh_trials=job.n, index=job.index)
        return ProbeAnswer(job.revision, step, step.trials)
    if job.mode == "trials":
        return ProbeAnswer(job.revision, None, tuple(probe.trials(job.revision, job.spec, job.n)))
    if job.mode == "fresh":
        return ProbeAnswer(job.revision, None, tuple(probe.fresh_trials(job.revision, job.spec, job.n)))
    raise ValueError(f"unknown probe mode {job.mode!r}")


def lost_answer(job: ProbeJob, reason: str, folder: Path, interrupted: bool = False) -> ProbeAnswer:
    """A probe that handed nothing back (killed, failed): infra trials, so the oracle skips the revision."""
    outcome = Outcome.INTERRUPTED if interrupted else Outcome.INFRA
    trials = (Trial(outcome, None, reason, artifacts=str(folder)),)
    if job.mode != "judge":
        return ProbeAnswer(job.revision, None, trials * max(1, job.n))
    step = StepRecord(kind=job.kind, revision=job.revision, label=job.label, verdict=Verdict.SKIP, term="skip",
                      reason=f"infra: {reason}", trials=trials, cached=0, elapsed_s=0.0, index=job.index)
    return ProbeAnswer(job.revision, step, trials)


class ProbeRunner(Protocol):
    """Runs a round of probe jobs at once; their answers in the order of the jobs."""

    jobs: int

    def run(self, jobs: Sequence[ProbeJob]) -> list[ProbeAnswer]:
        ...


class LocalProbes:
    """Each probe a ``python -P -m harness.bisect.fleet`` process on this machine, up to ``jobs`` at once.

    A process per probe, not a thread: a run owns signal handlers and a process group of its own. Each
    child holds a pipe from this process and stops (SIGTERM to itself, its server torn down) when it reads
    end of file, so a harness that dies, even by SIGKILL, leaves no probe behind."""

    def __init__(self, jobs: int, folder: Path) -> None:
        self.jobs = jobs
        # Absolute: each probe runs in the package's folder (cwd=PACKAGE_ROOT), where a relative BASE.job names
        # nothing (issue 37: `--jobs 100000 --out o` from another folder ended in exit 3 on the .job path).
        self.folder = folder.absolute()

    def run(self, jobs: Sequence[ProbeJob]) -> list[ProbeAnswer]:
        answers: list[ProbeAnswer] = []
        for start in range(0, len(jobs), self.jobs):
            answers += self._run_at_once(jobs[start:start + self.jobs])
        return answers

    def _run_at_once(self, jobs: Sequence[ProbeJob]) -> list[ProbeAnswer]:
        self.folder.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH")) if p)
        running: list[tuple[ProbeJob, subprocess.Popen[bytes], Path]] = []
        try:
            for job in jobs:
                base = self.folder / job.name
                write_atomic_bytes(base.with_suffix(".job"), pickle.dumps(job))
                with base.with_suffix(".log").open("wb") as log:
                    proc = subprocess.Popen([sys.executable, "-P", "-m", "harness.bisect.fleet", str(base)],
                                            stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env,
                                            cwd=PACKAGE_ROOT)
                running.append((job, proc, base))
            answers = []
            for job, proc, base in running:
                try:
                    proc.wait(timeout=job.deadline_s)
                except subprocess.TimeoutExpired:
                    _stop(proc)
                answers.append(self._answer(job, proc, base))
            return answers
        finally:  # Ctrl-C, or anything else: no probe outlives the round
            for _, proc, _ in running:
                if proc.poll() is None:
                    _stop(proc)

    @staticmethod
    def _answer(job: ProbeJob, proc: subprocess.Popen[bytes], base: Path) -> ProbeAnswer:
        out = base.with_suffix(".answer")
        if proc.returncode == 0 and out.is_file():
            answer = pickle.loads(read_bytes(out, "state"))
            if isinstance(answer, ProbeAnswer):
                return answer
        log = base.with_suffix(".log")
        tail = tail_lines(log, 1, skip_blank=True)
        why = f"probe process exited {proc.returncode}" + (f": {tail[0][:300]}" if tail else "")
        if proc.returncode == EXIT_ORACLE_FAILED:  # a broken oracle must not steer the search
            raise InfraError(f"bisect: the oracle failed at {job.revision[:12]}, stopping the search "
                             f"(log {log}): {tail[0][:300] if tail else ''}")
        return lost_answer(job, why, base.parent)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """TERM (the probe tears its server down), then KILL."""
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    end_child(proc, grace_s=_JOB_GRACE_S)


class SlurmProbes:
    """Each probe one SLURM job (an array per round), through the same executor as ``run --executor slurm``."""

    def __init__(self, jobs: int, options: SlurmOptions) -> None:
        self.jobs = jobs
        self.executor = SlurmExecutor(options, call=probe_job, result_type=ProbeAnswer, lost=lost_answer)

    def run(self, jobs: Sequence[ProbeJob]) -> list[ProbeAnswer]:
        return self.executor.run_jobs(jobs)


class FleetProbe(Probe):
    """A probe whose every question (trials, a judgement) is a job of ``runner``; the spec by commit."""

    def __init__(self, state: SearchState, case_hardware: Hardware, scenario_s: float, runner: ProbeRunner,
                 spec_of: Callable[[str], str], repo: Path) -> None:
        self.state = state
        self.hardware = case_hardware
        self.scenario_s = scenario_s
        self.runner = runner
        self.spec_of = spec_of
        self.repo = repo

    def job(self, mode: str, *, kind: str, revision: str, label: str = "", index: int = 0, n: int = 0) -> ProbeJob:
        trials = max(n, self.state.limits.max_trials, self.state.limits.max_inconclusive)
        return ProbeJob(state=self.state, store=self.state.store, mode=mode, kind=kind, revision=revision,
                        label=label or describe_commit(self.repo, revision), spec=self.spec_of(revision),
                        hardware=self.hardware, deadline_s=self.scenario_s * (trials + 1), index=index, n=n)

    def judge(self, *, kind: str, revision: str, label: str, spec: str, target: Target | None = None,
              fresh_trials: int = 0, index: int = 0) -> StepRecord:
        (answer,) = self.runner.run([self.job("judge", kind=kind, revision=revision, label=label, index=index,
                                              n=fresh_trials)])
        assert answer.step is not None
        return answer.step

    def fresh_trials(self, revision: str, spec: str, n: int) -> list[Trial]:
        (answer,) = self.runner.run([self.job("fresh", kind="confirm", revision=revision, n=n)])
        return list(answer.trials)

    def trials(self, revision: str, spec: str, n: int) -> list[Trial]:
        (answer,) = self.runner.run([self.job("trials", kind="endpoint", revision=revision, n=n)])
        return list(answer.trials)


class _Tree:
    """What the confirmation needs of a checkout, for builds by commit: nothing to check out."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def checkout(self, commit: str) -> None:
        pass


def _spec_of(layout: str, repo: Path, base: str | None) -> Callable[[str], str]:
    if layout == "sglang":
        return lambda commit: f"src:{repo}@{commit}" + (f",base={base}" if base else "")
    return lambda commit: f"simsrc:{repo}@{commit}"


def bisect_commits_kary(request: Request, repo: Path, good_rev: str, bad_rev: str,
                        runner: ProbeRunner) -> CommitResult:
    """The first new commit of ``good..bad`` (first-parent), ``runner.jobs`` revisions a round."""
    repo = repo.expanduser().absolute()
    good, bad = resolve_endpoints(repo, good_rev, bad_rev)
    old, new = ordered_ends(repo, good, bad, request.find)
    layout = layout_of(repo, bad)
    case = load_case(request.scenario, request.case)
    revs = git(repo, "rev-list", "--first-parent", "--reverse", f"{old}..{new}").split()
    count, k = len(revs), runner.jobs
    rounds_expected = expected_rounds(count, k)
    terms = ("good", "bad") if request.find is Find.REGRESSION else ("broken", "fixed")
    report_dir = request.report_dir
    report_dir.mkdir(parents=True, exist_ok=True)
    started = time.time()
    spec_of = _spec_of(layout, repo, request.base)
    state = SearchState(
        scenario=str(request.scenario.absolute()), case=case.name, build_template=spec_of("{commit}"),
        target=Target(), limits=request.limits, find=request.find, report_dir=str(report_dir.absolute()),
        store=request.store, batch=request.batch,
        # the experiment of git bisect run's steps too: a revision's known trials serve either search
        experiment=experiment_key(read_text(request.scenario, "source"), case.name, f"{layout}-tree"),
        expected_steps=rounds_expected, started=started, out_root=str(report_dir.absolute()))
    scenario_s = float(case.scenario.timeouts.scenario_s)

    def probe_of(s: SearchState) -> FleetProbe:
        return FleetProbe(s, case.scenario.hardware, scenario_s, runner, spec_of, repo)

    ends = {"good": good, "bad": bad}

    def trials_at(which: str, n: int) -> list[Trial]:
        progress(f"endpoint {which}: {ends[which][:12]} ({n} trial{'s' if n != 1 else ''})  "
                 f"(elapsed {time.time() - started:.0f}s)")
        return probe_of(state).trials(ends[which], spec_of(ends[which]), n)

    endpoints = establish(trials_at, signature=request.signature, metric=request.metric,
                          threshold=request.threshold, limits=request.limits, catalogue=Catalogue.load())
    state = replace(state, target=endpoints.target)
    record_endpoints(report_dir, state, ends, endpoints)
    write_atomic(report_dir / "state.json", state.to_json())  # a resumed search reads it: never half of it
    probe = probe_of(state)
    progress(f"searching {count} commits ({old[:12]}..{new[:12]}, first parents) for "
             f"{endpoints.target.describe()}, {k} at once: about {rounds_expected} rounds")
    known, rounds, log = _rounds(probe, revs, rounds_expected)
    result = result_of(count, known, rounds=rounds)
    culprit = culprit_of(repo, revs[result.first_new]) if result.first_new is not None else None
    candidates = tuple(revs[i] for i in result.candidates)
    confirmed = False
    if culprit is not None:
        log.append(f"first {terms[1]} commit: {culprit.commit}")
        confirmed = confirm_culprit(probe, _Tree(repo), culprit, state, started, request.threshold)
    elif candidates:
        log.append(f"the first {terms[1]} commit could be any of: {' '.join(candidates)}")
    return CommitResult(repo=str(repo), layout=layout, good=good, bad=bad, terms=terms, target=state.target,
                        culprit=culprit, candidates=candidates, confirmed=confirmed,
                        steps=tuple(read_steps(report_dir)), bisect_log="\n".join(log), git_output="",
                        commits_in_range=count, expected_steps=rounds_expected, jobs=k, rounds=rounds)


def _rounds(probe: FleetProbe, revs: Sequence[str], rounds_expected: int) -> tuple[dict[int, str], int, list[str]]:
    """The K-ary search's rounds, each round's K probes at once: (answers by index, rounds, log lines)."""
    state, runner, report_dir = probe.state, probe.runner, Path(probe.state.report_dir)
    known: dict[int, str] = {len(revs) - 1: NEW}
    answer_of = {0: OLD, 1: NEW, 125: SKIP}
    log: list[str] = []
    rounds = steps = 0
    while picks := next_round(len(revs), known, runner.jobs):
        rounds += 1
        jobs = [probe.job("judge", kind="step", revision=revs[i], index=steps + j + 1) for j, i in enumerate(picks)]
        steps += len(jobs)
        progress(f"round {rounds} of ~{rounds_expected}: testing {len(jobs)} commits at once: "
                 + ", ".join(revs[i][:12] for i in picks) + f"  (elapsed {time.time() - state.started:.0f}s)")
        for i, answer in zip(picks, runner.run(jobs), strict=True):
            assert answer.step is not None
            record = replace(answer.step, extra={**answer.step.extra, "round": rounds})
            append_step(report_dir, record)
            known[i] = answer_of[state.exit_code(record.verdict)]
            log.append(f"round {rounds}: {record.term} {revs[i]} ({record.reason[:200]})")
            progress(f"round {rounds}: {revs[i][:12]} is {record.term} ({record.reason}; {record.launched} "
                     f"launched, {record.cached} cached)")
    return known, rounds, log


def _watch_parent() -> None:
    """SIGTERM to this process when the harness's pipe (stdin) reaches end of file: the harness is gone."""
    def watch() -> None:
        # os.read on the raw descriptor: a daemon thread blocked in sys.stdin's buffered reader would hold
        # its lock at interpreter shutdown, which aborts the process (Fatal Python error, SIGABRT).
        with contextlib.suppress(OSError):
            while os.read(0, 4096):
                pass
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True).start()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -P -m harness.bisect.fleet BASE``: run BASE.job, write BASE.answer (exit 0), else exit 1."""
    from harness.util.interrupts import sigterm_as_ctrl_c

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        sys.stderr.write("usage: python -P -m harness.bisect.fleet BASE (BASE.job in, BASE.answer out)\n")
        return EXIT_USAGE
    base = Path(args[0])
    _watch_parent()
    try:
        with sigterm_as_ctrl_c():
            job = pickle.loads(read_bytes(base.with_suffix(".job"), "state"))
            answer = probe_job(job)
    except KeyboardInterrupt:
        sys.stderr.write("bisect: probe stopped by a signal\n")
        return EXIT_FAIL
    except Exception as exc:  # the oracle itself failed: the search must stop (as step.py's 128 stops git)
        sys.stderr.write(f"bisect: the oracle failed: {type(exc).__name__}: {exc}\n")
        return EXIT_ORACLE_FAILED
    write_atomic_bytes(base.with_suffix(".answer"), pickle.dumps(answer))  # the fleet reads it once it appears
    return 0


if __name__ == "__main__":
    # Run the module's importable copy: what it pickles must name harness.bisect.fleet, not __main__.
    from harness.bisect.fleet import main as _main

    sys.exit(_main())
