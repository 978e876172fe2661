"""The workload phase: requests sent to a ready server (async, bounded concurrency, streamed) while it is still
watched for death, crash signatures and the scenario bound; its verdict and client-side metrics; then, when it
passed and nothing hung, what the server says of itself (:mod:`harness.pipeline.scrape`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from harness.measure.acceptance import accept_by_position
from harness.measure.server_side import aggregate
from harness.pipeline.judge import crash_verdict
from harness.pipeline.scrape import resolved_backends, scrape
from harness.pipeline.stages import Driven, Plan, Resolved, RunContext, Trail
from harness.records.manifest import Manifest
from harness.records.metric_definitions import position_metric
from harness.records.outcome import Outcome, Phase
from harness.records.request_log import RequestRecord
from harness.records.run_record import RunVerdict
from harness.scenario.model import Scenario
from harness.server.auth import request_headers
from harness.server.process import ServerProcess
from harness.workload.phases import drive_phases

__all__ = ["drive", "workload"]

_DEADLINE = "scenario deadline reached"
_LISTEN_WAIT_S = 60.0  # from SGLang's ready line to uvicorn's bind: under a second when idle, seconds when loaded


def workload(server: ServerProcess, resolved: Resolved, plan: Plan, ctx: RunContext, trail: Trail) -> RunVerdict:
    """The workload on a ready server, then (when it passed and nothing hung) what the server says of itself."""
    # SGLang's ready line can come before its socket is bound (ServerProcess.wait_listening); a server that never
    # binds is left to the workload, which then fails on its first request as it would have.
    server.wait_listening(min(_LISTEN_WAIT_S, max(0.0, ctx.deadline - time.monotonic())))
    trail.backends = resolved_backends(server, resolved)
    trail.driven = driven = drive(server, resolved, plan, ctx)
    if driven.verdict.outcome is Outcome.PASS and not driven.hung:
        trail.scraped = scrape(server, resolved)
    return driven.verdict


def drive(server: ServerProcess, resolved: Resolved, plan: Plan, ctx: RunContext) -> Driven:
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
        return driven(crash_verdict(server.crash_match, server.log_tail(400), server.exit_code, Phase.WORKLOAD))
    if aborted == _DEADLINE:
        return driven(RunVerdict(Outcome.TIMEOUT, f"workload: scenario bound of {sc.timeouts.scenario_s:g} s "
                                 "reached", Phase.WORKLOAD))
    if failed and len(timeouts) == len(failed):
        return driven(RunVerdict(Outcome.TIMEOUT, f"workload: {len(timeouts)} request(s) hit the "
                                 f"{sc.timeouts.request_s:g} s bound", Phase.WORKLOAD))
    return driven(RunVerdict(Outcome.PASS, "all checks held", Phase.WORKLOAD))
