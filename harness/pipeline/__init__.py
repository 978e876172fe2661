"""One run: one case x one build x one trial, from resolving the build to ``result.json``.

The flow (design.md), one function per phase, each returning a small record:

1. resolve: the build and its launcher (:mod:`harness.launch.launcher`); a build that cannot be had is infra;
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
import errno
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import __version__
from harness.build import Build, BuildFailure, Builds, describe_environment
from harness.contract import facts as contract
from harness.launch.build_profile import build_profile
from harness.launch.launcher import Launcher, hardware_gap, launcher_for
from harness.measure.acceptance import accept_by_position
from harness.measure.expectation import judge_run
from harness.measure.server_side import (
    AttentionBackends,
    aggregate,
    attention_backends,
    attention_from_start,
    read_server_figures,
    server_info,
)
from harness.records.artifacts import new_run_dir, write_env, write_record, write_repro
from harness.records.manifest import Manifest
from harness.records.metric_definitions import (
    OUTPUT_THROUGHPUT,
    READY_S,
    REQUESTS_FAILED,
    REQUESTS_OK,
    SERVER_TRIAL,
    position_metric,
)
from harness.records.outcome import Outcome, Phase
from harness.records.request_log import RequestRecord
from harness.records.run_record import (
    BuildRef,
    CaseRef,
    CheckResult,
    RunRecord,
    RunVerdict,
    ScenarioRef,
    ServerInfo,
    TeardownInfo,
    experiment_digest,
    host_to_dict,
)
from harness.scenario import Case, server_flags
from harness.scenario.model import Bound, Checks, Scenario
from harness.server import hardware
from harness.server.auth import admin_headers, request_headers
from harness.server.lease import DEFAULT_GPU_LEASE_TIMEOUT_S, gpu_env, lease_gpus, lease_port
from harness.server.pool import LiveServer, ServerPool, pool_key
from harness.server.process import ServerDied, ServerProcess, StartupTimeout
from harness.signatures.catalogue import Catalogue, Match, last_traceback
from harness.util.atomic import write_atomic_bytes
from harness.util.bounded_read import ReadRefused, read_from, read_head
from harness.util.clock import now_iso
from harness.util.errors import HarnessError, UserError
from harness.util.interrupts import Shield, sigterm_as_ctrl_c, taken
from harness.util.redact import redact_argv, redact_env, redact_log
from harness.util.text import first_line
from harness.workload.phases import PhasePlan, drive_phases, evaluate_phase_checks, phase_plans, refuse_flush
from harness.workload.prompts import Prompt

__all__ = ["RunDiskFull", "RunInterrupted", "RunOptions", "evaluate_checks", "execute_run", "resolve_for"]

log = logging.getLogger(__name__)

_EXCERPT_CHARS = 6000
_DEADLINE = "scenario deadline reached"
# One /server_info read per trial, once the server is ready (real SGLang asks its scheduler for the internal
# states, so allow more than the per-figure bound of harness.measure.server_side).
_SERVER_INFO_TIMEOUT_S = 5.0
_LOG_HEAD_BYTES = 1 << 20  # the default-backend line is written early in start-up


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


class RunDiskFull(RunInterrupted):
    """The run ended but the disk under its folder is full: some artifacts (or ``result.json`` itself) were
    not written. ``record`` is the complete record, for the store; the command stops as for an interrupt
    (what finished is kept) and says so in one line, exit 3."""

    def __init__(self, record: RunRecord, lost: Sequence[str]) -> None:
        KeyboardInterrupt.__init__(self, f"{record.artifacts}: no space left on the device; not written: "
                                         + ", ".join(lost))
        self.record = record
        self.lost = tuple(lost)


# A write that fails for want of room (or a device that stopped taking writes): the run's artifacts are lost,
# the record is not.
_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO})


def _kept(lost: list[str], what: str, write: Callable[[], object]) -> None:
    try:
        write()
    except OSError as exc:
        if exc.errno not in _DISK_ERRNOS:
            raise
        lost.append(what)


# --------------------------------------------------------------------------- phase records


@dataclass(frozen=True)
class Resolved:
    """Phase 1 for a build that was had: the build, its launcher, and the case as that launcher runs it."""

    build: Build
    launcher: Launcher
    case: Case


@dataclass(frozen=True)
class Unresolved:
    """Phase 1 for a build that could not be had: the run ends here, as infra."""

    build: BuildFailure
    case: Case
    verdict: RunVerdict


@dataclass(frozen=True)
class Plan:
    """What the server is started with and sent; pre-flight judges it before anything starts."""

    prompts: list[Prompt]
    port: int
    flags: list[str]
    argv: list[str]
    env_overlay: dict[str, str]  # the build's and the scenario's; a start adds its GPUs' (``Launched``)
    phases: tuple[PhasePlan, ...] = ()  # a stateful workload's phases (``prompts`` is then all of theirs)


@dataclass(frozen=True)
class Launched:
    """The server this trial runs on: started for it, or reused from the pool; not yet known to be ready."""

    server: ServerProcess
    env_overlay: dict[str, str]
    log_offset: int = 0  # where this trial's part of a pooled server's log starts


@dataclass(frozen=True)
class Ready:
    """The server is ready for this trial: how long a start took, or which trial of a shared server this is."""

    metrics: dict[str, float | None]
    live: LiveServer | None = None  # the pooled server this trial ran on


@dataclass(frozen=True)
class Driven:
    """The workload's verdict, its client-side metrics, and what it was (to compare like with like)."""

    verdict: RunVerdict
    metrics: dict[str, float | None]
    failing_request: int | None
    manifest: Manifest | None
    hung: bool  # a request timed out: the server may be hung, so nothing more is asked of it


@dataclass(frozen=True)
class Scraped:
    """What the server said of itself after the workload: its metrics and the model's ground truth."""

    metrics: dict[str, float | None]
    truth: Mapping[str, Any] | None


@dataclass(frozen=True)
class RunPaths:
    run_dir: Path
    log: Path
    requests: Path
    tag: str


@dataclass(frozen=True)
class RunContext:
    """What every phase of one run is given: where its artifacts go, its bound, its options."""

    paths: RunPaths
    deadline: float  # time.monotonic() at which the scenario bound is reached
    options: RunOptions
    catalogue: Catalogue
    trial: int
    pool: ServerPool | None


@dataclass
class Trail:
    """How far one run got: each phase's record, set by the phase's caller as it arrives, so a phase cut
    short (an interrupt, the harness's own failure) still leaves what came before it to the run record."""

    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase of the harness's own work
    plan: Plan | None = None
    launched: Launched | None = None
    ready: Ready | None = None
    driven: Driven | None = None
    scraped: Scraped | None = None
    teardown: TeardownInfo | None = None
    backends: AttentionBackends | None = None  # what the server said it resolved, once it was ready
    signals_after_judged: int = 0  # SIGINT/SIGTERM taken in the teardown after the workload had its verdict

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.timings[phase] = round(self.timings.get(phase, 0.0) + time.monotonic() - t0, 4)

    @property
    def metrics(self) -> dict[str, float | None]:
        return {**(self.ready.metrics if self.ready else {}), **(self.driven.metrics if self.driven else {}),
                **(self.scraped.metrics if self.scraped else {})}

    @property
    def live(self) -> LiveServer | None:
        return self.ready.live if self.ready else None


# --------------------------------------------------------------------------- 1. resolve


def resolve_for(case: Case, spec: str, builds: Builds) -> Build | BuildFailure:
    """The build of ``spec`` for runs of ``case``, resolved once per ``builds`` (one per command); UserError
    for a bad spec. A full ``pip:`` environment is not created on a host that cannot run the case."""
    # Creating a full environment pulls the GPU stack (gigabytes): not on a host that cannot run it.
    return builds.get(spec, install_gap=lambda: hardware_gap(case))


def _resolve(case: Case, build: Build | BuildFailure) -> Resolved | Unresolved:
    if isinstance(build, BuildFailure):
        return Unresolved(build, case, RunVerdict(Outcome.INFRA, f"pre-flight: {build.reason}", Phase.PREFLIGHT))
    launcher = launcher_for(build)
    return Resolved(build, launcher, launcher.case_for(case))


# --------------------------------------------------------------------------- 2. pre-flight


def _plan(resolved: Resolved, prompts: list[Prompt], port: int, env_overlay: dict[str, str],
          phases: tuple[PhasePlan, ...] = ()) -> Plan:
    flags = server_flags(resolved.case.scenario, port=port)
    return Plan(prompts, port, flags, [*resolved.build.launcher, *flags], env_overlay, phases)


def _preflight(resolved: Resolved, plan: Plan) -> RunVerdict | None:
    """Why this run cannot even be tried, or None. Nothing is launched here."""
    launcher = resolved.launcher
    check = launcher.check_flags([plan.flags])[0]
    if not check.ok:
        return RunVerdict(Outcome.INFRA, f"pre-flight: {launcher.build.spec} rejects the flags: {check.message}",
                          Phase.PREFLIGHT)
    gap = launcher.missing(resolved.case)
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


def _crash_verdict(match: Match | None, log_text: str, exit_code: int | None, phase: Phase) -> RunVerdict:
    if match is not None:
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


def _serve(resolved: Resolved, ctx: RunContext, trail: Trail) -> RunVerdict:
    """Pre-flight, then a server (reused from the pool or started), the workload, server-side metrics.

    Each phase's record goes into ``trail`` as it arrives. Without a pool the server is torn down here; with
    one, a ready server is handed to the pool (``execute_run`` evicts it when the trial does not pass).
    """
    case, launcher, pool = resolved.case, resolved.launcher, ctx.pool
    sc = case.scenario
    phases = phase_plans(case, launcher.prompts, ctx.trial) if sc.stateful else ()
    prompts = [p for ph in phases for p in ph.prompts] if phases else launcher.prompts(case, ctx.trial)
    env_overlay = {**resolved.build.env, **sc.server.env}
    key = pool_key(resolved.build.spec, server_flags(sc, port=0), env_overlay)
    live = pool.get(key) if pool is not None else None
    if live is not None:
        return _serve_reused(live, resolved, prompts, ctx, trail)
    with ExitStack() as leases:
        trail.plan = plan = _plan(resolved, prompts, leases.enter_context(lease_port(sc.server.host)).port,
                                  env_overlay, phases)
        with trail.timed("preflight"):
            problem = _preflight(resolved, plan)
        if problem is not None:
            return problem
        needed = launcher.gpus_needed(case)
        trail.launched = launched = _launch(resolved, plan, needed, ctx, leases)
        server = launched.server
        handed_over = False
        judged: RunVerdict | None = None
        try:
            with trail.timed("start"):
                try:
                    ready_s = _start(server)
                except (ServerDied, StartupTimeout) as exc:
                    return _not_ready(server, exc, plan.flags)
            live = None
            if pool is not None:
                live = LiveServer(key, server, leases.pop_all(), plan.flags, plan.argv, launched.env_overlay,
                                  plan.port, ready_s, needed, trials=1)
                pool.add(live)
                handed_over = True
            trail.ready = Ready({READY_S: round(ready_s, 3)}, live)
            with trail.timed("workload"):
                judged = _workload(server, resolved, plan, ctx, trail)
            return judged
        finally:
            if not handed_over:
                with trail.timed("teardown"):
                    trail.teardown = _teardown(server, trail, judged=judged is not None)


def _launch(resolved: Resolved, plan: Plan, needed: int, ctx: RunContext, leases: ExitStack) -> Launched:
    """The server process of a fresh start (not started yet), its GPUs leased for as long as ``leases`` lives."""
    sc, pool = resolved.case.scenario, ctx.pool
    if pool is not None:
        pool.make_room(needed)
    gpu_indices, gpu_overlay = _gpus(needed, ctx.options, leases)
    env_overlay = {**plan.env_overlay, **gpu_overlay}
    matcher = ctx.catalogue.stream(_watched(resolved.case, ctx.catalogue))
    startup_s = min(sc.timeouts.startup_s, max(1.0, ctx.deadline - time.monotonic()))
    server = ServerProcess(
        plan.argv, env={**os.environ, **env_overlay}, host=sc.server.host, port=plan.port,
        log_path=pool.log_path(ctx.paths.tag) if pool is not None else ctx.paths.log, run_tag=ctx.paths.tag,
        startup_timeout_s=startup_s, on_line=matcher.feed, gpu_indices=gpu_indices,
    )
    return Launched(server, env_overlay)


def _gpus(needed: int, opts: RunOptions, leases: ExitStack) -> tuple[Sequence[int], dict[str, str]]:
    """The GPUs of one start and their environment: the caller's (``opts.gpus``), else leased for as long as
    ``leases`` lives."""
    if not needed:
        return (), {}
    if opts.gpus is not None:
        return tuple(opts.gpus), dict(gpu_env(opts.gpus))
    inventory = [g.index for g in hardware.inventory()]
    gpus = leases.enter_context(lease_gpus(needed, inventory, timeout_s=opts.gpu_lease_timeout_s))
    return gpus.indices, dict(gpus.env)


def _serve_reused(live: LiveServer, resolved: Resolved, prompts: list[Prompt], ctx: RunContext,
                  trail: Trail) -> RunVerdict:
    """A trial on a server an earlier trial started: caches flushed, the model's counters restarted."""
    refuse_flush(resolved.case.scenario)  # execute_run gives a stateful trial no pool; this keeps it so
    server = live.server
    trail.plan = plan = Plan(prompts, live.port, live.flags, live.argv, dict(live.env_overlay))
    offset = server.log_path.stat().st_size if server.log_path.exists() else 0
    trail.launched = Launched(server, dict(live.env_overlay), offset)
    trail.ready = Ready({SERVER_TRIAL: float(live.trials)}, live)
    live.trials += 1
    problem = resolved.launcher.begin_trial(server.url, admin_headers(resolved.case.scenario.server.args))
    if problem:
        return RunVerdict(Outcome.INFRA, f"workload: the shared server could not start a trial: {problem}",
                          Phase.WORKLOAD)
    with trail.timed("workload"):
        return _workload(server, resolved, plan, ctx, trail)


def _start(server: ServerProcess) -> float:
    """Seconds to ready; ServerDied or StartupTimeout for a start that did not get there."""
    server.start()
    ready_s = server.wait_ready()
    log.info("server ready in %.1f s at %s", ready_s, server.url)
    return ready_s


def _not_ready(server: ServerProcess, exc: ServerDied | StartupTimeout, flags: Sequence[str]) -> RunVerdict:
    """The verdict of a start that did not reach ready: in start-up or in SGLang's own warm-up."""
    log_text = server.log_tail(400)
    phase = _before_ready_phase(log_text, flags, server.http_answered)
    if isinstance(exc, ServerDied):
        return _crash_verdict(exc.crash_match, log_text, exc.server_exit_code, phase)
    return RunVerdict(Outcome.TIMEOUT, f"{phase.value}: {exc}", phase)


def _workload(server: ServerProcess, resolved: Resolved, plan: Plan, ctx: RunContext, trail: Trail) -> RunVerdict:
    """The workload on a ready server, then (when it passed and nothing hung) what the server says of itself."""
    trail.backends = _resolved_backends(server, resolved)
    trail.driven = driven = _drive(server, resolved, plan, ctx)
    if driven.verdict.outcome is Outcome.PASS and not driven.hung:
        trail.scraped = _scrape(server, resolved)
    return driven.verdict


def _drive(server: ServerProcess, resolved: Resolved, plan: Plan, ctx: RunContext) -> Driven:
    """The workload on a ready server, still watching it; its verdict and client-side metrics."""
    from harness.workload.driver import run_workload  # aiohttp loads only when a server is driven

    sc = resolved.case.scenario
    wl, deadline = sc.workload, ctx.deadline

    def should_abort() -> str | None:
        # The scenario bound goes through the same path as a dying server, so the records so far are kept.
        failure = server.failure()
        if failure:
            return failure
        return _DEADLINE if time.monotonic() >= deadline else None

    if plan.phases:
        phased = drive_phases(server.url, plan.phases, request_timeout_s=sc.timeouts.request_s, stream=wl.stream,
                              jsonl_path=ctx.paths.requests, should_abort=should_abort,
                              progress=ctx.options.progress, headers=request_headers(sc.server.args))
        return _driven_verdict(server, sc, phased.records, phased.aborted, phased.metrics, phased.manifest)
    result = asyncio.run(run_workload(
        server.url, plan.prompts, concurrency=wl.concurrency, request_rate=wl.request_rate,
        max_new_tokens=wl.max_new_tokens, ignore_eos=wl.ignore_eos, temperature=wl.temperature,
        stream=wl.stream, warmup=wl.warmup, request_timeout_s=sc.timeouts.request_s,
        jsonl_path=ctx.paths.requests, should_abort=should_abort, seed=wl.prompt.seed,
        progress=ctx.options.progress, headers=request_headers(sc.server.args),
    ))
    metrics = aggregate(result.records, trace=result.trace, manifest=result.manifest)
    return _driven_verdict(server, sc, result.records, result.aborted, {**metrics, **_positions(result.records)},
                           result.manifest)


def _positions(records: Sequence[RequestRecord]) -> dict[str, float | None]:
    """The acceptance rate at each draft position of the measured requests (accept_rate_pos<k>), present only
    where the server sent a histogram: what a baseline check per position judges (harness.baselines)."""
    measured = [r for r in records if not r.warmup and r.ok]
    return {position_metric(k): rate for k, rate in enumerate(accept_by_position(measured), 1)}


def _driven_verdict(server: ServerProcess, sc: Scenario, records: Sequence[RequestRecord], aborted: str | None,
                    metrics: dict[str, float | None], manifest: Manifest | None) -> Driven:
    """The workload's verdict from its records (one workload, or every phase of a stateful one)."""
    from harness.workload.driver import ErrorKind

    failed = [r for r in records if not r.ok]
    timeouts = [r for r in failed if r.error_kind is ErrorKind.TIMEOUT]  # failure kinds are types, not words

    def driven(verdict: RunVerdict) -> Driven:
        return Driven(verdict, metrics, failed[0].index if failed else None, manifest, bool(timeouts))

    # A crash line can trail the last failed request slightly: give the watcher a moment when anything failed.
    if server.died.wait(0.3 if failed else 0.0) or server.failure():
        return driven(_crash_verdict(server.crash_match, server.log_tail(400), server.exit_code, Phase.WORKLOAD))
    if aborted == _DEADLINE:
        return driven(RunVerdict(Outcome.TIMEOUT, f"workload: scenario bound of {sc.timeouts.scenario_s:g} s "
                                 "reached", Phase.WORKLOAD))
    if failed and len(timeouts) == len(failed):
        return driven(RunVerdict(Outcome.TIMEOUT, f"workload: {len(timeouts)} request(s) hit the "
                                 f"{sc.timeouts.request_s:g} s bound", Phase.WORKLOAD))
    return driven(RunVerdict(Outcome.PASS, "all checks held", Phase.WORKLOAD))


def _scrape(server: ServerProcess, resolved: Resolved) -> Scraped:
    """The server-side metrics (``/metrics`` when enabled, SGLang's own figures) and the model's ground truth."""
    args = resolved.case.scenario.server.args
    figures = read_server_figures(server.url, metrics_enabled=bool(args.get("enable-metrics")),
                                  headers=request_headers(args))
    return Scraped(figures.as_metrics(), resolved.launcher.ground_truth(server.url))


def _resolved_backends(server: ServerProcess, resolved: Resolved) -> AttentionBackends | None:
    """The attention backends the ready server resolved, from its `/server_info` (harness.contract.facts
    RESOLVED_ATTENTION_KEYS); None when it does not say within the bound."""
    args = resolved.case.scenario.server.args
    info = server_info(server.url, timeout_s=_SERVER_INFO_TIMEOUT_S, headers=request_headers(args))
    return attention_backends(info, speculative=_speculative(args)) if info else None


def _speculative(args: Mapping[str, Any]) -> bool:
    algo = args.get("speculative-algorithm")
    return bool(algo) and str(algo).upper() != "NONE"


def _backends(trail: Trail, paths: RunPaths, sc: Scenario) -> AttentionBackends | None:
    """What the server said it resolved, else (a server that never answered) its flags or its log."""
    if trail.backends is not None or trail.plan is None:
        return trail.backends
    try:
        head = read_head(paths.log, "log", _LOG_HEAD_BYTES).decode("utf-8", errors="replace")
    except (OSError, ReadRefused):
        head = ""
    return attention_from_start(trail.plan.flags, head, speculative=_speculative(sc.server.args))


def _teardown(server: ServerProcess, trail: Trail, *, judged: bool) -> TeardownInfo:
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


# --------------------------------------------------------------------------- 4. judge


def evaluate_checks(checks: Checks, metrics: Mapping[str, float | None]) -> list[CheckResult]:
    """The scenario's absolute checks on one run's metrics, each with whether it held.

    ``checks.relative`` needs a baseline role and is judged by ``compare``, not here.
    """
    out = []
    ok, bad = int(metrics.get(REQUESTS_OK.name) or 0), int(metrics.get(REQUESTS_FAILED.name) or 0)
    if checks.all_requests_succeed:
        out.append(CheckResult("all requests succeed", held=bool(ok) and not bad,
                               detail=f"{bad} of {ok + bad} requests failed" if bad or not ok else f"{ok} ok"))
    bounds: list[tuple[Bound | None, str, str, str]] = [
        (checks.output_throughput, OUTPUT_THROUGHPUT.name, "output throughput tok/s", "output throughput tok/s")]
    if checks.accept_length is not None:  # it names which of SGLang's acceptance lengths it bounds
        a = checks.accept_length
        bounds.insert(0, (a, a.metric, "accept length", f"accept length ({a.source}: {a.metric})"))
    for bound, name, label, what in bounds:
        # A baseline check alone (no min/max) is judged on the item's trials together (harness.baselines).
        if bound is not None and (bound.min is not None or bound.max is not None):
            problem = bound.violation(metrics.get(name), what)
            out.append(CheckResult(f"{label} within bounds", held=problem is None, detail=problem or ""))
    return out + evaluate_phase_checks(checks, metrics)  # a stateful workload's per-phase and cross-phase checks


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


def _record(resolved: Resolved | Unresolved, trail: Trail, verdict: RunVerdict, checks: tuple[CheckResult, ...],
            paths: RunPaths, *, role: str | None, trial: int, started: float, started_at: str) -> RunRecord:
    record_started = time.monotonic()
    case, build = resolved.case, resolved.build
    sc = case.scenario
    plan, launched, driven = trail.plan, trail.launched, trail.driven
    lost: list[str] = []  # artifacts a full disk kept out: the record still goes to the store, and the command stops
    if trail.live is not None and launched is not None:
        live_log, offset = trail.live.server.log_path, launched.log_offset
        _kept(lost, "server.log", lambda: _copy_log_slice(live_log, offset, paths.log))
    host = hardware.host_info()
    _kept(lost, "env.json", lambda: write_env(paths.run_dir, {**_environment(build), "host": host_to_dict(host)}))
    env_overlay = launched.env_overlay if launched else plan.env_overlay if plan else {}
    if plan is not None and plan.argv:
        index = (driven.failing_request if driven else None) or 0
        request = plan.prompts[index] if plan.prompts else None
        argv, port = plan.argv, plan.port
        _kept(lost, "repro.sh", lambda: write_repro(
            paths.run_dir, argv=argv, env=env_overlay, host=sc.server.host, port=port,
            request=_request_body(request, case) if request else None,
            note=f"{sc.name} / {case.name} on {build.spec}: {verdict.outcome.value} ({verdict.reason})"))
    build_ref = _build_ref(build, role)
    expectation = None
    if role and role in sc.expect:
        expectation = judge_run(role, sc.expect[role], verdict.outcome, verdict.signature, verdict.phase,
                                build_ref.profile)
    server = launched.server if launched else None
    backends = _backends(trail, paths, sc)
    record = RunRecord(
        run_id=paths.tag,
        scenario=ScenarioRef(name=sc.name, file=str(case.file)),
        case=CaseRef(name=case.name, values=dict(case.values)),
        build=build_ref,
        trial=trial,
        outcome=verdict.outcome,
        signature=verdict.signature,
        reason=verdict.reason,
        metrics=trail.metrics,
        server=ServerInfo(argv=tuple(redact_argv(plan.argv if plan else [])), env=redact_env(env_overlay),
                          log=str(paths.log), exit_code=server.exit_code if server else None,
                          run_tag=server.run_tag if server else paths.tag, teardown=trail.teardown,
                          **(backends.as_dict() if backends else {})),
        host=host,
        started_at=started_at,
        duration_s=round(time.monotonic() - started, 3),
        harness_version=__version__,
        artifacts=str(paths.run_dir),
        phase=verdict.phase,
        excerpt=verdict.excerpt,
        checks=checks,
        expectation=expectation,
        ground_truth=trail.scraped.truth if trail.scraped else None,
        manifest=driven.manifest if driven else None,
        timings={**trail.timings, "record": round(time.monotonic() - record_started, 4)},
        experiment=experiment_digest(plan.flags, sc.workload.model_dump(mode="json")) if plan else "",
    )
    _kept(lost, "result.json", lambda: write_record(paths.run_dir, record))
    if lost:
        raise RunDiskFull(record, lost)
    return record


def _environment(build: Build | BuildFailure) -> dict[str, Any]:
    """``env.json`` but for the host: the build's interpreter described."""
    try:
        return (describe_environment(build) if isinstance(build, Build)
                else {"build": build.spec, "error": "not resolved"})
    except HarnessError as exc:
        return {"error": str(exc)}


def _build_ref(build: Build | BuildFailure, role: str | None) -> BuildRef:
    if isinstance(build, BuildFailure):
        return BuildRef(kind=build.kind, spec=build.spec, role=role, reference_server=build.is_reference)
    return BuildRef(kind=build.kind, spec=build.spec, version=build.version, commit=build.commit, role=role,
                    reference_server=build.is_reference, profile=build_profile(build))


def _version_label(build: Build | BuildFailure) -> str:
    return (build.version if isinstance(build, Build) else None) or build.kind


def _copy_log_slice(source: Path, offset: int, target: Path) -> None:
    """This trial's part of a shared server's log (its start-up too, for the trial that started it); the server
    log is redacted as it is written (``harness.server.process``), so the slice is too."""
    if not source.exists():
        return
    write_atomic_bytes(target, read_from(source, "log", offset))


def _request_body(prompt: Prompt, case: Case) -> dict[str, Any]:
    from harness.workload.driver import request_body

    wl = case.scenario.workload
    return request_body(prompt, max_new_tokens=wl.max_new_tokens, ignore_eos=wl.ignore_eos,
                        temperature=wl.temperature, stream=wl.stream)


# --------------------------------------------------------------------------- the run


def _phase_reached(trail: Trail) -> Phase:
    """Where an interrupt found the run, from what its trail holds (the record and the store keep it)."""
    if trail.launched is None and trail.ready is None:
        return Phase.PREFLIGHT
    if trail.ready is None:
        return Phase.STARTUP
    return Phase.WORKLOAD if trail.driven is None else Phase.TEARDOWN


def _serve_guarded(resolved: Resolved, ctx: RunContext, trail: Trail) -> RunVerdict:
    """``_serve`` with what stops the harness itself turned into the run's verdict (``interrupted`` for SIGINT
    or SIGTERM, the server torn down)."""
    try:
        return _serve(resolved, ctx, trail)
    except UserError:
        raise
    except HarnessError as exc:
        # What stopped the harness itself (a lease that timed out, a tokenizer that is missing) means
        # the product was never tried: infra, in the phase the run had reached.
        phase = Phase.PREFLIGHT if trail.launched is None else Phase.STARTUP
        return RunVerdict(Outcome.INFRA, f"{phase.value}: {first_line(exc)}", phase)
    except KeyboardInterrupt as exc:
        taken()  # the command's first interrupt is this run's verdict; a second signal only hurries now
        return RunVerdict(Outcome.INTERRUPTED, f"interrupted ({first_line(exc) or 'SIGINT'}); "
                          "the server was torn down", _phase_reached(trail))
    except OSError as exc:
        # A full disk or a vanished output folder: the harness could not keep the run's artifacts.
        return RunVerdict(Outcome.INFRA, f"harness I/O error: {exc}", None)


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
    started_at = now_iso()
    resolved = _resolve(case, resolve_for(case, build, Builds()) if isinstance(build, str) else build)
    trail = Trail(timings={"resolve": round(time.monotonic() - started, 4)})
    sc = resolved.case.scenario
    label = role or resolved.build.kind
    run_dir = new_run_dir(sc.name, case.name, f"{label}-{_version_label(resolved.build)}", trial, opts.out_root)
    paths = RunPaths(run_dir, run_dir / "server.log", run_dir / "requests.jsonl",
                     f"{run_dir.name}-{secrets.token_hex(4)}")
    # A stateful trial (workload phases) never meets a shared or flushed server.
    pool = pool if sc.server.share_between_trials and not sc.stateful else None
    ctx = RunContext(paths, started + sc.timeouts.scenario_s, opts, opts.catalogue or Catalogue.load(), trial, pool)
    with sigterm_as_ctrl_c():
        served = resolved.verdict if isinstance(resolved, Unresolved) else _serve_guarded(resolved, ctx, trail)
        verdict, checks = _judge(served, sc.checks, trail.metrics)
        with Shield(reraise=False) as late:  # issue 24: from here a signal only hurries; the record is written
            live = trail.live
            if live is not None and pool is not None and verdict.outcome is not Outcome.PASS:
                # A fresh server after any crash, failed check or interruption: never carry a broken one on.
                with trail.timed("teardown"):
                    trail.teardown = pool.evict(live.key)
            record = _record(resolved, trail, verdict, checks, paths, role=role, trial=trial, started=started,
                             started_at=started_at)
    if served.outcome is Outcome.INTERRUPTED or late.count or trail.signals_after_judged:
        taken()  # a signal the late shield deferred is the command's first interrupt too
        raise RunInterrupted(record)
    return record
