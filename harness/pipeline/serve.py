"""Phase 3 of a run: a server to run on, reused from the pool or launched (a port and GPUs leased, its own
process group, its log watched live), ready (start-up, then SGLang's own warm-up) or failed fast, then the
workload (:mod:`harness.pipeline.drive`); teardown always follows a start the pool did not take.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from contextlib import ExitStack

from harness.pipeline.drive import workload
from harness.pipeline.judge import not_ready_verdict
from harness.pipeline.resolve import fresh_plan, preflight
from harness.pipeline.stages import Launched, Plan, Ready, Resolved, RunContext, RunOptions, Trail
from harness.pipeline.teardown import teardown
from harness.records.metric_definitions import READY_S, SERVER_TRIAL
from harness.records.outcome import Outcome, Phase
from harness.records.run_record import RunVerdict
from harness.scenario import Case, server_flags
from harness.server import hardware
from harness.server.auth import admin_headers
from harness.server.lease import SGLANG_HIGHEST_PORT, gpu_env, lease_gpus, lease_port
from harness.server.pool import LiveServer, pool_key
from harness.server.process import ServerDied, ServerProcess, StartupTimeout
from harness.signatures.catalogue import Catalogue
from harness.workload.phases import phase_plans, refuse_flush
from harness.workload.prompts import Prompt

__all__ = ["serve"]

log = logging.getLogger(__name__)


def serve(resolved: Resolved, ctx: RunContext, trail: Trail) -> RunVerdict:
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
        highest = 65535 if resolved.build.is_reference else SGLANG_HIGHEST_PORT  # real SGLang needs port + 10000
        trail.plan = plan = fresh_plan(resolved, prompts,
                                       leases.enter_context(lease_port(sc.server.host, highest=highest)).port,
                                       env_overlay, phases)
        with trail.timed("preflight"):
            problem = preflight(resolved, plan)
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
                    return not_ready_verdict(server, exc, plan.flags)
            live = None
            if pool is not None:
                live = LiveServer(key, server, leases.pop_all(), plan.flags, plan.argv, launched.env_overlay,
                                  plan.port, ready_s, needed, trials=1)
                pool.add(live)
                handed_over = True
            trail.ready = Ready({READY_S: round(ready_s, 3)}, live)
            with trail.timed("workload"):
                judged = workload(server, resolved, plan, ctx, trail)
            return judged
        finally:
            if not handed_over:
                with trail.timed("teardown"):
                    trail.teardown = teardown(server, trail, judged=judged is not None)


def _watched(case: Case, catalogue: Catalogue) -> list[str] | None:
    """Signatures the live watcher looks for: the scenario's, plus every infra one (they decide infra)."""
    chosen = case.scenario.checks.crash_signatures
    if chosen == "all":
        return None
    infra = [s.id for s in catalogue.signatures if s.kind == "infra"]
    return list(dict.fromkeys([*chosen, *infra]))


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
        return workload(server, resolved, plan, ctx, trail)


def _start(server: ServerProcess) -> float:
    """Seconds to ready; ServerDied or StartupTimeout for a start that did not get there."""
    server.start()
    ready_s = server.wait_ready()
    log.info("server ready in %.1f s at %s", ready_s, server.url)
    return ready_s
