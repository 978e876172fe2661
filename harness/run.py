"""One run: one case x one build x one trial, from resolving the build to ``result.json``.

The flow (design.md), one function per phase, each returning a small record:

1. resolve: the build and its launcher (:mod:`harness.launcher`); a build that cannot be had is infra;
2. pre-flight: prompts, flags parsed by the build's own parser, model files, hardware: nothing started;
3. serve: lease a port (and GPUs), start the server in its own process group with its log watched live,
   ready (start-up, then SGLang's own warm-up) or fail fast, the workload while still watching, then
   server-side metrics; teardown always follows;
4. judge: the scenario's checks on the metrics of a run that got that far;
5. record: the typed run record and its artifacts (``result.json``, ``env.json``, ``repro.sh``).

Every phase is bounded by the scenario's timeouts and ends in a verdict. A run interrupted by SIGINT or
SIGTERM still tears its server down and writes its record (outcome ``interrupted``), then raises
:class:`RunInterrupted` so the caller stops too.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import signal
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from types import FrameType
from typing import Any

from harness import __version__, contract, hardware
from harness.artifacts import new_run_dir, write_env, write_record, write_repro
from harness.auth import admin_headers, request_headers
from harness.build import Build, BuildFailure, Builds, describe_environment
from harness.errors import HarnessError, UserError
from harness.expectation import judge_run
from harness.interrupts import Shield
from harness.launcher import Launcher, hardware_gap, launcher_for
from harness.lease import DEFAULT_GPU_LEASE_TIMEOUT_S, gpu_env, lease_gpus, lease_port
from harness.metrics import aggregate, read_server_figures
from harness.outcome import Outcome, Phase
from harness.prompts import Prompt
from harness.record import (
    BuildRef,
    CaseRef,
    CheckResult,
    RunRecord,
    RunVerdict,
    ScenarioRef,
    ServerInfo,
    TeardownInfo,
    experiment_digest,
    host_from_dict,
)
from harness.redact import redact_argv, redact_env, redact_log
from harness.scenario import Case, server_flags
from harness.scenario.model import Bound, Checks
from harness.server import ServerDied, ServerProcess, StartupTimeout
from harness.server_pool import LiveServer, ServerPool, pool_key, teardown_info
from harness.signatures import Catalogue, Match, last_traceback
from harness.text import first_line

__all__ = ["RunInterrupted", "RunOptions", "evaluate_checks", "execute_run", "resolve_for"]

log = logging.getLogger(__name__)

_EXCERPT_CHARS = 6000
_DEADLINE = "scenario deadline reached"


@dataclass(frozen=True)
class RunOptions:
    out_root: Path | None = None
    progress: bool | None = None
    gpu_lease_timeout_s: float = DEFAULT_GPU_LEASE_TIMEOUT_S
    catalogue: Catalogue | None = None
    # GPUs the caller already holds a lease on (the pytest plugin leases per item, across its
    # trials): the run uses exactly these and leases none itself.
    gpus: tuple[int, ...] | None = None


class RunInterrupted(KeyboardInterrupt):
    """The run was stopped by SIGINT or SIGTERM; its record (outcome ``interrupted``) is written."""

    def __init__(self, record: RunRecord) -> None:
        super().__init__(f"run interrupted: {record.artifacts}")
        self.record = record


# --------------------------------------------------------------------------- phase records


@dataclass(frozen=True)
class Resolved:
    build: Build | BuildFailure
    launcher: Launcher | None
    case: Case
    problem: RunVerdict | None = None


@dataclass
class Attempt:
    """What serving produced; filled as far as the run got."""

    verdict: RunVerdict | None = None
    prompts: list[Prompt] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    argv: list[str] = field(default_factory=list)
    env_overlay: dict[str, str] = field(default_factory=dict)
    port: int = 0
    server: ServerProcess | None = None
    failing_request: int | None = None
    metrics: dict[str, float | None] = field(default_factory=dict)
    truth: Mapping[str, Any] | None = None
    teardown: TeardownInfo | None = None
    live: LiveServer | None = None  # the pooled server this trial ran on
    log_offset: int = 0  # where this trial's part of a pooled server's log starts
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase of the harness's own work
    manifest: dict[str, Any] | None = None  # what the workload was, to compare like with like

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.timings[phase] = round(self.timings.get(phase, 0.0) + time.monotonic() - t0, 4)


@dataclass(frozen=True)
class RunPaths:
    run_dir: Path
    log: Path
    requests: Path
    tag: str


# --------------------------------------------------------------------------- 1. resolve


def resolve_for(case: Case, spec: str, builds: Builds) -> Build | BuildFailure:
    """The build of ``spec`` for runs of ``case``, resolved once per ``builds`` (one per command); UserError
    for a bad spec. A full ``pip:`` environment is not created on a host that cannot run the case."""
    # Creating a full environment pulls the GPU stack (gigabytes): not on a host that cannot run it.
    return builds.get(spec, install_gap=lambda: hardware_gap(case))


def _resolve(case: Case, build: Build | BuildFailure) -> Resolved:
    if isinstance(build, BuildFailure):
        return Resolved(build, None, case, RunVerdict(Outcome.INFRA, f"pre-flight: {build.reason}", Phase.PREFLIGHT))
    launcher = launcher_for(build)
    return Resolved(build, launcher, launcher.case_for(case))


# --------------------------------------------------------------------------- 2. pre-flight


def _preflight(case: Case, launcher: Launcher, flags: list[str]) -> RunVerdict | None:
    """Why this run cannot even be tried, or None. Nothing is launched here."""
    check = launcher.check_flags([flags])[0]
    if not check.ok:
        return RunVerdict(Outcome.INFRA, f"pre-flight: {launcher.build.spec} rejects the flags: {check.message}",
                          Phase.PREFLIGHT)
    gap = launcher.missing(case)
    if gap:
        return RunVerdict(Outcome.INFRA, f"pre-flight: {gap}", Phase.PREFLIGHT)
    return None


# --------------------------------------------------------------------------- 3. serve


def _before_ready_phase(log_text: str, flags: Sequence[str], http_answered: bool = False) -> Phase:
    """Start-up, or SGLang's own warm-up request (the HTTP server was up and warm-up was not skipped).

    From evidence that holds at every ``--log-level`` first: SGLang's warm-up failure line and the
    running-phase SIGQUIT line are ERROR records (the latter means the tokenizer manager had taken a
    request, which before the ready line is the warm-up), and ``http_answered`` means the HTTP server
    answered a health probe (503 while warming up). uvicorn's INFO line, hidden at warning, comes last.
    """
    if contract.WARMUP_FAILED_LINE in log_text:
        return Phase.WARMUP
    if contract.SKIP_SERVER_WARMUP_FLAG in flags:
        return Phase.STARTUP
    if http_answered or contract.CHILD_FAILED_RUNNING_LINE in log_text:
        return Phase.WARMUP
    return Phase.WARMUP if contract.UVICORN_RUNNING in log_text else Phase.STARTUP


def _crash_verdict(match: object | None, log_text: str, exit_code: int | None, phase: Phase) -> RunVerdict:
    if isinstance(match, Match):
        sig = match.signature
        outcome = Outcome.INFRA if sig.kind == "infra" else Outcome.CRASH
        return RunVerdict(outcome, f"{phase.value}: {sig.title}: {match.line.strip()[:300]}", phase, sig.id,
                          redact_log(match.excerpt)[-_EXCERPT_CHARS:])
    tb = last_traceback(log_text)
    last = tb.strip().splitlines()[-1] if tb else None
    detail = f"; last exception: {last[:300]}" if last else "; no traceback in the log"
    excerpt = tb or "\n".join(log_text.splitlines()[-20:])
    return RunVerdict(Outcome.CRASH, f"{phase.value}: server exited with code {exit_code}{detail}", phase, "unknown",
                      redact_log(excerpt)[-_EXCERPT_CHARS:])


def _watched(case: Case, catalogue: Catalogue) -> list[str] | None:
    """Signatures the live watcher looks for: the scenario's, plus every infra one (they decide infra)."""
    chosen = case.scenario.checks.crash_signatures
    if chosen == "all":
        return None
    infra = [s.id for s in catalogue.signatures if s.kind == "infra"]
    return list(dict.fromkeys([*chosen, *infra]))


def _serve(resolved: Resolved, paths: RunPaths, deadline: float, opts: RunOptions, catalogue: Catalogue,
           attempt: Attempt, trial: int, pool: ServerPool | None) -> None:
    """Pre-flight, then a server (reused from ``pool`` or started), the workload, server-side metrics.

    Fills ``attempt`` as it goes. Without a pool the server is torn down here; with one, a ready server is
    handed to the pool (``execute_run`` evicts it when the trial does not pass).
    """
    case, launcher = resolved.case, resolved.launcher
    assert launcher is not None
    build, sc = launcher.build, case.scenario
    attempt.prompts = launcher.prompts(case, trial)
    env_overlay = {**build.env, **sc.server.env}
    key = pool_key(build.spec, server_flags(sc, port=0), env_overlay)
    live = pool.get(key) if pool is not None else None
    if live is not None:
        _reuse(live, resolved, attempt, paths, deadline, opts)
        return
    with ExitStack() as leases:
        port_lease = leases.enter_context(lease_port(sc.server.host))
        attempt.port = port_lease.port
        attempt.flags = server_flags(sc, port=attempt.port)
        attempt.argv = [*build.launcher, *attempt.flags]
        with attempt.timed("preflight"):
            attempt.verdict = _preflight(case, launcher, attempt.flags)
        if attempt.verdict is not None:
            return
        attempt.env_overlay = dict(env_overlay)
        needed = launcher.gpus_needed(case)
        if pool is not None:
            pool.make_room(needed)
        gpu_indices = _gpus(needed, opts, leases, attempt)
        matcher = catalogue.stream(_watched(case, catalogue))
        startup_s = min(sc.timeouts.startup_s, max(1.0, deadline - time.monotonic()))
        server = ServerProcess(
            attempt.argv, env={**os.environ, **attempt.env_overlay}, host=sc.server.host, port=attempt.port,
            log_path=pool.log_path(paths.tag) if pool is not None else paths.log, run_tag=paths.tag,
            startup_timeout_s=startup_s, on_line=matcher.feed, gpu_indices=gpu_indices,
        )
        attempt.server = server
        handed_over = False
        try:
            with attempt.timed("start"):
                ready = _start(server, attempt)
            if isinstance(ready, RunVerdict):
                attempt.verdict = ready
                return
            attempt.metrics["ready_s"] = round(ready, 3)
            if pool is not None:
                attempt.live = LiveServer(key, server, leases.pop_all(), attempt.flags, attempt.argv,
                                          attempt.env_overlay, attempt.port, ready, needed, trials=1)
                pool.add(attempt.live)
                handed_over = True
            with attempt.timed("workload"):
                attempt.verdict = _drive(server, resolved, attempt, paths, deadline, opts)
        finally:
            if not handed_over:
                with attempt.timed("teardown"):
                    attempt.teardown = _teardown(server)


def _gpus(needed: int, opts: RunOptions, leases: ExitStack, attempt: Attempt) -> Sequence[int]:
    """The GPUs of one start: the caller's (``opts.gpus``), else leased for as long as ``leases`` lives."""
    if not needed:
        return ()
    if opts.gpus is not None:
        attempt.env_overlay.update(gpu_env(opts.gpus))
        return tuple(opts.gpus)
    inventory = [g.index for g in hardware.inventory()]
    gpus = leases.enter_context(lease_gpus(needed, inventory, timeout_s=opts.gpu_lease_timeout_s))
    attempt.env_overlay.update(gpus.env)
    return gpus.indices


def _reuse(live: LiveServer, resolved: Resolved, attempt: Attempt, paths: RunPaths, deadline: float,
           opts: RunOptions) -> None:
    """A trial on a server an earlier trial started: caches flushed, the model's counters restarted."""
    assert resolved.launcher is not None
    attempt.live, attempt.server = live, live.server
    attempt.port, attempt.flags, attempt.argv = live.port, live.flags, live.argv
    attempt.env_overlay = dict(live.env_overlay)
    attempt.log_offset = live.server.log_path.stat().st_size if live.server.log_path.exists() else 0
    attempt.metrics["server_trial"] = float(live.trials)
    live.trials += 1
    problem = resolved.launcher.begin_trial(live.server.url, admin_headers(resolved.case.scenario.server.args))
    if problem:
        attempt.verdict = RunVerdict(Outcome.INFRA, f"workload: the shared server could not start a trial: {problem}",
                                     Phase.WORKLOAD)
        return
    with attempt.timed("workload"):
        attempt.verdict = _drive(live.server, resolved, attempt, paths, deadline, opts)


def _start(server: ServerProcess, attempt: Attempt) -> float | RunVerdict:
    """Seconds to ready, or the verdict of a start that did not get there."""
    server.start()
    try:
        ready_s = server.wait_ready()
    except ServerDied as exc:
        log_text = server.log_tail(400)
        phase = _before_ready_phase(log_text, attempt.flags, server.http_answered)
        return _crash_verdict(exc.crash_match, log_text, exc.server_exit_code, phase)
    except StartupTimeout as exc:
        phase = _before_ready_phase(server.log_tail(400), attempt.flags, server.http_answered)
        return RunVerdict(Outcome.TIMEOUT, f"{phase.value}: {exc}", phase)
    log.info("server ready in %.1f s at %s", ready_s, server.url)
    return ready_s


def _drive(server: ServerProcess, resolved: Resolved, attempt: Attempt, paths: RunPaths, deadline: float,
           opts: RunOptions) -> RunVerdict:
    """The workload on a ready server, still watching it, then the server-side metrics."""
    from harness.workload import ErrorKind, run_workload  # aiohttp loads only when a server is driven

    case, launcher = resolved.case, resolved.launcher
    assert launcher is not None
    sc = case.scenario
    wl = sc.workload

    def should_abort() -> str | None:
        # The scenario bound goes through the same path as a dying server, so the records so far are kept.
        failure = server.failure()
        if failure:
            return failure
        return _DEADLINE if time.monotonic() >= deadline else None

    result = asyncio.run(run_workload(
        server.url, attempt.prompts, concurrency=wl.concurrency, request_rate=wl.request_rate,
        max_new_tokens=wl.max_new_tokens, ignore_eos=wl.ignore_eos, temperature=wl.temperature,
        stream=wl.stream, warmup=wl.warmup, request_timeout_s=sc.timeouts.request_s, jsonl_path=paths.requests,
        should_abort=should_abort, seed=wl.prompt.seed, progress=opts.progress,
        headers=request_headers(sc.server.args),
    ))
    attempt.manifest = result.manifest.to_dict() if result.manifest is not None else None
    failed = [r for r in result.records if not r.ok]
    attempt.failing_request = failed[0].index if failed else None
    attempt.metrics.update(aggregate(result.records, trace=result.trace, manifest=result.manifest))
    # A crash line can trail the last failed request slightly: give the watcher a moment when anything failed.
    if server.died.wait(0.3 if failed else 0.0) or server.failure():
        return _crash_verdict(server.crash_match, server.log_tail(400), server.exit_code, Phase.WORKLOAD)
    if result.aborted == _DEADLINE:
        return RunVerdict(Outcome.TIMEOUT, f"workload: scenario bound of {sc.timeouts.scenario_s:g} s reached",
                          Phase.WORKLOAD)
    # Failure kinds are types, never words in a message.
    timeouts = [r for r in failed if r.error_kind is ErrorKind.TIMEOUT]
    if failed and len(timeouts) == len(failed):
        return RunVerdict(Outcome.TIMEOUT, f"workload: {len(timeouts)} request(s) hit the "
                          f"{sc.timeouts.request_s:g} s bound", Phase.WORKLOAD)
    if not timeouts:  # a server whose requests timed out may be hung: nothing more is asked of it
        attempt.metrics.update(read_server_figures(
            server.url, metrics_enabled=bool(sc.server.args.get("enable-metrics")),
            headers=request_headers(sc.server.args)).as_metrics())
        attempt.truth = launcher.ground_truth(server.url)
    return RunVerdict(Outcome.PASS, "all checks held", Phase.WORKLOAD)


def _teardown(server: ServerProcess) -> TeardownInfo:
    return teardown_info(server.stop())


# --------------------------------------------------------------------------- 4. judge


def evaluate_checks(checks: Checks, metrics: Mapping[str, float | None]) -> list[CheckResult]:
    """The scenario's absolute checks on one run's metrics, each with whether it held.

    ``checks.relative`` needs a baseline role and is judged by ``compare``, not here.
    """
    out = []
    ok, bad = int(metrics.get("requests_ok") or 0), int(metrics.get("requests_failed") or 0)
    if checks.all_requests_succeed:
        out.append(CheckResult("all requests succeed", held=bool(ok) and not bad,
                               detail=f"{bad} of {ok + bad} requests failed" if bad or not ok else f"{ok} ok"))
    bounds: list[tuple[Bound | None, str, str, str]] = [
        (checks.output_throughput, "output_throughput_tok_s", "output throughput tok/s", "output throughput tok/s")]
    if checks.accept_length is not None:  # it names which of SGLang's acceptance lengths it bounds
        a = checks.accept_length
        bounds.insert(0, (a, a.metric, "accept length", f"accept length ({a.source}: {a.metric})"))
    for bound, name, label, what in bounds:
        if bound is not None:
            problem = bound.violation(metrics.get(name), what)
            out.append(CheckResult(f"{label} within bounds", held=problem is None, detail=problem or ""))
    return out


def _judge(verdict: RunVerdict, checks: Checks, metrics: Mapping[str, float | None]) -> tuple[RunVerdict,
                                                                                            tuple[CheckResult, ...]]:
    if verdict.outcome is not Outcome.PASS:
        return verdict, ()
    results = tuple(evaluate_checks(checks, metrics))
    failed = [c.detail for c in results if not c.held]
    if failed:
        return RunVerdict(Outcome.FAIL, "; ".join(failed), Phase.WORKLOAD), results
    return verdict, results


# --------------------------------------------------------------------------- 5. record


def _record(resolved: Resolved, attempt: Attempt, verdict: RunVerdict, checks: tuple[CheckResult, ...],
            paths: RunPaths, *, role: str | None, trial: int, started: float, started_at: str) -> RunRecord:
    record_started = time.monotonic()
    case, build = resolved.case, resolved.build
    sc = case.scenario
    if attempt.live is not None:
        _copy_log_slice(attempt.live.server.log_path, attempt.log_offset, paths.log)
    env_info = _environment(build)
    write_env(paths.run_dir, env_info)
    if attempt.argv:
        index = attempt.failing_request or 0
        request = attempt.prompts[index] if attempt.prompts else None
        write_repro(paths.run_dir, argv=attempt.argv, env=attempt.env_overlay, host=sc.server.host, port=attempt.port,
                    request=_request_body(request, case) if request else None,
                    note=f"{sc.name} / {case.name} on {build.spec}: {verdict.outcome.value} ({verdict.reason})")
    expectation = None
    if role and role in sc.expect:
        expectation = judge_run(role, sc.expect[role], verdict.outcome, verdict.signature, verdict.phase)
    workload = sc.workload.model_dump(mode="json")
    server = attempt.server
    record = RunRecord(
        run_id=paths.tag,
        scenario=ScenarioRef(name=sc.name, file=str(case.file)),
        case=CaseRef(name=case.name, values=dict(case.values)),
        build=_build_ref(build, role),
        trial=trial,
        outcome=verdict.outcome,
        signature=verdict.signature,
        reason=verdict.reason,
        metrics=dict(attempt.metrics),
        server=ServerInfo(argv=tuple(redact_argv(attempt.argv)), env=redact_env(attempt.env_overlay),
                          log=str(paths.log), exit_code=server.exit_code if server else None,
                          run_tag=server.run_tag if server else paths.tag,
                          teardown=attempt.teardown),
        host=host_from_dict(env_info["host"]),
        started_at=started_at,
        duration_s=round(time.monotonic() - started, 3),
        harness_version=__version__,
        artifacts=str(paths.run_dir),
        phase=verdict.phase,
        excerpt=verdict.excerpt,
        checks=checks,
        expectation=expectation,
        ground_truth=attempt.truth,
        manifest=attempt.manifest,
        timings={**attempt.timings, "record": round(time.monotonic() - record_started, 4)},
        experiment=experiment_digest(attempt.flags, workload) if attempt.flags else "",
    )
    write_record(paths.run_dir, record)
    return record


def _environment(build: Build | BuildFailure) -> dict[str, Any]:
    """``env.json``: the build's interpreter described, and the host."""
    env_info: dict[str, Any]
    try:
        env_info = (describe_environment(build) if isinstance(build, Build)
                    else {"build": build.spec, "error": "not resolved"})
    except HarnessError as exc:
        env_info = {"error": str(exc)}
    env_info["host"] = hardware.host_info()
    return env_info


def _build_ref(build: Build | BuildFailure, role: str | None) -> BuildRef:
    if isinstance(build, BuildFailure):
        return BuildRef(kind=build.kind, spec=build.spec, role=role, reference_server=build.is_reference)
    return BuildRef(kind=build.kind, spec=build.spec, version=build.version, commit=build.commit, role=role,
                    reference_server=build.is_reference)


def _version_label(build: Build | BuildFailure) -> str:
    return (build.version if isinstance(build, Build) else None) or build.kind


def _copy_log_slice(source: Path, offset: int, target: Path) -> None:
    """This trial's part of a shared server's log (its start-up too, for the trial that started it); the server
    log is redacted as it is written (``harness.server``), so the slice is too."""
    if not source.exists():
        return
    with open(source, "rb") as f:
        f.seek(offset)
        target.write_bytes(f.read())


def _request_body(prompt: Prompt, case: Case) -> dict[str, Any]:
    from harness.workload import request_body

    wl = case.scenario.workload
    return request_body(prompt, max_new_tokens=wl.max_new_tokens, ignore_eos=wl.ignore_eos,
                        temperature=wl.temperature, stream=wl.stream)


# --------------------------------------------------------------------------- the run


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM ends a run the way Ctrl-C does (teardown, a record), not by dying on the spot."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _serve_guarded(resolved: Resolved, paths: RunPaths, deadline: float, opts: RunOptions, catalogue: Catalogue,
                   attempt: Attempt, trial: int, pool: ServerPool | None) -> bool:
    """``_serve`` with what stops the harness itself turned into the attempt's verdict; True when interrupted."""
    try:
        _serve(resolved, paths, deadline, opts, catalogue, attempt, trial, pool)
    except UserError:
        raise
    except HarnessError as exc:
        # What stopped the harness itself (a lease that timed out, a tokenizer that is missing) means
        # the product was never tried: infra, in the phase the run had reached.
        phase = Phase.PREFLIGHT if attempt.server is None else Phase.STARTUP
        attempt.verdict = RunVerdict(Outcome.INFRA, f"{phase.value}: {first_line(exc)}", phase)
    except KeyboardInterrupt as exc:
        attempt.verdict = RunVerdict(Outcome.INTERRUPTED, f"interrupted ({first_line(exc) or 'SIGINT'}); "
                                     "the server was torn down", None)
        return True
    except OSError as exc:
        # A full disk or a vanished output folder: the harness could not keep the run's artifacts.
        attempt.verdict = RunVerdict(Outcome.INFRA, f"harness I/O error: {exc}", None)
    return False


def execute_run(
    case: Case,
    build: str | Build | BuildFailure,
    *,
    role: str | None = None,
    trial: int = 0,
    options: RunOptions | None = None,
    pool: ServerPool | None = None,
) -> RunRecord:
    """Run ``case`` on one build once and return its record (also written to ``result.json``).

    ``build`` is resolved already (:func:`resolve_for`, once per command, so a command's trials share one
    resolution); a spec string is resolved here, for this one run. With a ``pool`` (and
    ``server.share_between_trials`` in the scenario) the trial reuses a server an earlier trial started,
    and leaves it there when it passes.
    Raises UserError for a bad build spec (nothing is started), and :class:`RunInterrupted` after writing
    the record of a run stopped by SIGINT or SIGTERM.
    """
    opts = options or RunOptions()
    started = time.monotonic()
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    resolved = _resolve(case, resolve_for(case, build, Builds()) if isinstance(build, str) else build)
    attempt = Attempt(verdict=resolved.problem, timings={"resolve": round(time.monotonic() - started, 4)})
    sc = resolved.case.scenario
    deadline = started + sc.timeouts.scenario_s
    catalogue = opts.catalogue or Catalogue.load()
    label = role or resolved.build.kind
    run_dir = new_run_dir(sc.name, case.name, f"{label}-{_version_label(resolved.build)}", trial, opts.out_root)
    paths = RunPaths(run_dir, run_dir / "server.log", run_dir / "requests.jsonl",
                     f"{run_dir.name}-{secrets.token_hex(4)}")
    interrupted = False
    if not sc.server.share_between_trials:
        pool = None
    with _sigterm_as_interrupt():
        if attempt.verdict is None:
            interrupted = _serve_guarded(resolved, paths, deadline, opts, catalogue, attempt, trial, pool)
        assert attempt.verdict is not None
        verdict, checks = _judge(attempt.verdict, sc.checks, attempt.metrics)
        with Shield(reraise=False) as late:  # issue 24: from here a signal only hurries; the record is written
            if attempt.live is not None and pool is not None and verdict.outcome is not Outcome.PASS:
                # A fresh server after any crash, failed check or interruption: never carry a broken one on.
                with attempt.timed("teardown"):
                    attempt.teardown = pool.evict(attempt.live.key)
            record = _record(resolved, attempt, verdict, checks, paths, role=role, trial=trial, started=started,
                             started_at=started_at)
    if interrupted or late.count:
        raise RunInterrupted(record)
    return record
