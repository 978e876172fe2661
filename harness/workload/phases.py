"""Stateful workloads: phases run in order against one server, with no flush between them.

A cache-state bug (sglang#32176: acceptance 4.487 -> 1.589 after long requests fill and evict the cache,
back after ``/flush_cache``) is invisible to a trial that meets a fresh or flushed server. A scenario with
``workload.phases`` sends a baseline, then pressure, then the measured phase (or shared-prefix, multi-turn
replays) to one server, and its figures are per phase: ``NAME@PHASE`` (``accept_length@after``,
``cache_hit_rate@pressure``), so the store, the nightly series and ``compare`` treat each as a metric of
its own with no schema change. The run's plain figures (``accept_length``, ...) are the last phase's; the
request counts are the run's.

Per phase, besides the client-side metrics of :mod:`harness.measure.client_side`: the prefix-cache hit rate measured
from ``cached_tokens`` (and the share loaded back from HiCache's host tier), acceptance by draft position
(``accept_rate_pos1``, ...), acceptance by cache state (``accept_length_miss`` / ``_device`` / ``_host``),
acceptance over the phase's time in quarters (``accept_length_q1`` .. ``_q4``), and the decline test of
:func:`harness.measure.acceptance.accept_trend` (``accept_trend_tau``, ``accept_trend_p``).

Such a trial never shares its server (``execute_run`` gives it no pool) and :func:`refuse_flush` stops
anything that would flush it.

A phase that ``joins`` the one before starts while that one still runs, once each of its measured
requests has streamed its first token (so sits in the server's running batch): the two run in one event
loop, each with its own records and figures. This is how a scenario sends a request into a busy batch
on purpose, rather than by the luck of arrival times.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.measure.acceptance import accept_by_position, accept_trend, cache_figures, cache_state
from harness.measure.client_side import derive_metrics, request_accept_length, request_verify_count
from harness.records.manifest import Manifest
from harness.records.metric_definitions import (
    ACCEPT_LENGTH,
    ACCEPT_RATE,
    CACHE_HIT_RATE,
    ITL_P50,
    OUTPUT_THROUGHPUT,
    PHASE_SEPARATOR,
    REQUESTS_FAILED,
    REQUESTS_OK,
    TTFT_P50,
    position_metric,
)
from harness.records.request_log import RequestRecord
from harness.records.run_record import CheckResult
from harness.scenario import Case
from harness.scenario.model import Bound, Checks, Scenario, WorkloadPhase
from harness.util.errors import HarnessError
from harness.workload.prompts import Prompt

if TYPE_CHECKING:
    from harness.workload.driver import WorkloadResult

__all__ = [
    "PHASE_SEPARATOR",
    "PhasePlan",
    "PhasedResult",
    "drive_phases",
    "evaluate_phase_checks",
    "phase_metric",
    "phase_plans",
    "refuse_flush",
    "split_phase_metric",
]

# The per-phase figures kept (of derive_metrics'); the rest stay run-level.
_KEPT = tuple(m.name for m in (ACCEPT_LENGTH, OUTPUT_THROUGHPUT, TTFT_P50, ITL_P50, REQUESTS_OK, REQUESTS_FAILED))
_QUARTERS = 4


def phase_metric(name: str, phase: str) -> str:
    return f"{name}{PHASE_SEPARATOR}{phase}"


def split_phase_metric(metric: str) -> tuple[str, str | None]:
    """(base metric, phase) of ``accept_length@after``; (metric, None) for a run-level one."""
    base, sep, phase = metric.partition(PHASE_SEPARATOR)
    return (base, phase) if sep and phase else (metric, None)


def refuse_flush(scenario: Scenario) -> None:
    """Raise before anything flushes (or reuses) a server inside a stateful trial."""
    if scenario.stateful:
        raise HarnessError(f"{scenario.name}: a stateful workload (workload.phases) must not meet a flushed or "
                           "shared server; its trial starts its own")


@dataclass(frozen=True)
class PhasePlan:
    """One phase as it will be sent: its prompts (warm-up ones first) and the sampling it uses."""

    name: str
    prompts: tuple[Prompt, ...]
    warmup: int
    concurrency: int
    max_new_tokens: int
    ignore_eos: bool
    temperature: float
    seed: int
    joins: str | None = None


def _phase_case(case: Case, phase: WorkloadPhase) -> Case:
    """``case`` with its workload narrowed to ``phase`` (unset fields inherit), to draw the phase's prompts."""
    wl = case.scenario.workload
    update: dict[str, object] = {"warmup": phase.warmup, "phases": None}
    if phase.requests is not None:
        update["requests"] = phase.requests
    if phase.prompt is not None:
        update["prompt"] = phase.prompt
    scenario = case.scenario.model_copy(update={"workload": wl.model_copy(update=update)})
    return dataclasses.replace(case, scenario=scenario)


def phase_plans(case: Case, prompts: Callable[[Case, int], list[Prompt]], trial: int) -> tuple[PhasePlan, ...]:
    """The phases of ``case`` with their prompts from ``prompts`` (the launcher's: counted by the server's tokenizer).

    A replay sends the measured prompts of the phase it names, in the same order.
    """
    wl = case.scenario.workload
    plans: dict[str, PhasePlan] = {}
    for phase in wl.phases or ():
        if phase.replay is not None:
            earlier = plans[phase.replay]
            chosen = earlier.prompts[earlier.warmup:]
            seed = earlier.seed
        else:
            sub = _phase_case(case, phase)
            chosen = tuple(prompts(sub, trial))
            seed = sub.scenario.workload.prompt.seed
        plans[phase.name] = PhasePlan(
            name=phase.name, prompts=chosen, warmup=phase.warmup if phase.replay is None else 0,
            concurrency=phase.concurrency or wl.concurrency, max_new_tokens=phase.max_new_tokens or wl.max_new_tokens,
            ignore_eos=wl.ignore_eos if phase.ignore_eos is None else phase.ignore_eos,
            temperature=wl.temperature if phase.temperature is None else phase.temperature, seed=seed,
            joins=phase.joins)
    return tuple(plans.values())


@dataclass(frozen=True)
class PhasedResult:
    """Every phase's records (in order), why the run stopped early (or None), the last phase's manifest."""

    records: tuple[RequestRecord, ...]
    by_phase: Mapping[str, tuple[RequestRecord, ...]]
    aborted: str | None
    manifest: Manifest | None
    metrics: dict[str, float | None]


def _mean_accept(records: Sequence[RequestRecord]) -> float | None:
    """Token-weighted acceptance length (sum of completion tokens / sum of verify steps), as sglang#32176 computes it."""
    tokens = verify = 0.0
    for r in records:
        v = request_verify_count(r.meta_info) if r.ok else None
        if v:
            tokens += r.completion_tokens
            verify += v
    return tokens / verify if verify else None


def phase_figures(records: Sequence[RequestRecord]) -> dict[str, float | None]:
    """The figures of one phase's measured requests beyond :func:`harness.measure.client_side.derive_metrics`."""
    ok = [r for r in records if r.ok]
    out: dict[str, float | None] = dict(cache_figures(ok))
    correct = sum(float(r.meta_info.get("spec_num_correct_drafts") or 0) for r in ok)
    proposed = sum(float(r.meta_info.get("spec_num_proposed_drafts") or 0) for r in ok)
    out[ACCEPT_RATE.name] = correct / proposed if proposed else None  # sglang#32176's second figure (69.9% -> 11.7%)
    for k, rate in enumerate(accept_by_position(ok), 1):
        out[position_metric(k)] = rate
    for state in ("miss", "device", "host"):
        out[f"accept_length_{state}"] = _mean_accept([r for r in ok if cache_state(r.meta_info) == state])
    timed = sorted((r for r in ok if r.done_ns is not None and request_accept_length(r.meta_info) is not None),
                   key=lambda r: r.done_ns or 0)
    if len(timed) >= _QUARTERS:
        for q in range(_QUARTERS):
            part = timed[q * len(timed) // _QUARTERS:(q + 1) * len(timed) // _QUARTERS]
            out[f"accept_length_q{q + 1}"] = _mean_accept(part)
    trend = accept_trend(ok)
    if trend is not None:
        out["accept_trend_tau"], out["accept_trend_p"] = trend.tau, trend.p_decline
    return out


def _groups(plans: Sequence[PhasePlan]) -> list[list[PhasePlan]]:
    """The phases in runs that overlap: a phase that joins the one before goes in that one's group."""
    groups: list[list[PhasePlan]] = []
    for plan in plans:
        if plan.joins is not None and groups:
            groups[-1].append(plan)
        else:
            groups.append([plan])
    return groups


async def _run_group(members: Sequence[PhasePlan],
                     one: Callable[[PhasePlan, asyncio.Event], Awaitable[WorkloadResult]]) -> list[WorkloadResult]:
    """The phases of one group: the first at once, each next one when the one before it is decoding."""
    tasks: list[asyncio.Future[WorkloadResult]] = []
    events: list[asyncio.Event] = []
    for plan in members:
        if tasks:
            # The joined phase's requests are decoding (or it ended, whatever way): this one's join its batch.
            decoding = asyncio.ensure_future(events[-1].wait())
            either: list[asyncio.Future[object]] = [decoding, tasks[-1]]  # type: ignore[list-item]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            decoding.cancel()
        events.append(asyncio.Event())
        tasks.append(asyncio.ensure_future(one(plan, events[-1])))
    return list(await asyncio.gather(*tasks))


def drive_phases(
    url: str,
    plans: Sequence[PhasePlan],
    *,
    request_timeout_s: float,
    stream: bool,
    jsonl_path: Path,
    should_abort: Callable[[], str | None],
    progress: bool | None,
    headers: Mapping[str, str],
) -> PhasedResult:
    """Each phase's workload in turn on the server at ``url``; no flush, no reset between them.

    Each phase's requests go to ``requests.<phase>.jsonl`` beside ``jsonl_path``; a phase stopped by
    ``should_abort`` (the server died, the scenario bound) ends the run there. A phase that joins the one
    before starts when that one's requests are decoding, and runs beside it.
    """
    from harness.workload.driver import run_workload  # aiohttp loads only when a server is driven

    async def one(plan: PhasePlan, decoding: asyncio.Event) -> WorkloadResult:
        return await run_workload(
            url, list(plan.prompts), concurrency=plan.concurrency, request_rate=None,
            max_new_tokens=plan.max_new_tokens, ignore_eos=plan.ignore_eos, temperature=plan.temperature,
            stream=stream, warmup=plan.warmup, request_timeout_s=request_timeout_s,
            jsonl_path=jsonl_path.with_name(f"{jsonl_path.stem}.{plan.name}{jsonl_path.suffix}"),
            should_abort=should_abort, seed=plan.seed, progress=progress, headers=headers, decoding=decoding,
        )

    by_phase: dict[str, tuple[RequestRecord, ...]] = {}
    metrics: dict[str, float | None] = {}
    aborted: str | None = None
    manifest: Manifest | None = None
    last: dict[str, float | None] = {}
    for members in _groups(plans):
        for plan, result in zip(members, asyncio.run(_run_group(members, one))):
            measured = tuple(r for r in result.records if not r.warmup)
            by_phase[plan.name] = tuple(result.records)
            last = derive_metrics(result.records, result.trace, result.manifest)
            for name in _KEPT:
                metrics[phase_metric(name, plan.name)] = last.get(name)
            for name, value in phase_figures(measured).items():
                metrics[phase_metric(name, plan.name)] = value
            manifest = result.manifest
            aborted = aborted or result.aborted
        if aborted:
            break
    records = tuple(r for rs in by_phase.values() for r in rs)
    measured_all = [r for r in records if not r.warmup]
    run_level = {**last, REQUESTS_OK.name: float(sum(r.ok for r in measured_all)),
                 REQUESTS_FAILED.name: float(sum(not r.ok for r in measured_all))}
    return PhasedResult(records, by_phase, aborted, manifest, {**run_level, **metrics})


def _bounded(bound: Bound | None, metrics: Mapping[str, float | None], metric: str, label: str) -> CheckResult | None:
    if bound is None:
        return None
    problem = bound.violation(metrics.get(metric), label)
    return CheckResult(f"{label} within bounds", held=problem is None, detail=problem or "")


def evaluate_phase_checks(checks: Checks, metrics: Mapping[str, float | None]) -> list[CheckResult]:
    """Per-phase bounds and cross-phase ratios on one run's metrics, each with whether it held."""
    out: list[CheckResult] = []
    for phase, pc in checks.phases.items():
        for bound, name, label in ((pc.accept_length, ACCEPT_LENGTH.name, "accept length"),
                                   (pc.cache_hit_rate, CACHE_HIT_RATE.name, "cache hit rate"),
                                   (pc.output_throughput, OUTPUT_THROUGHPUT.name, "output throughput tok/s")):
            result = _bounded(bound, metrics, phase_metric(name, phase), f"{phase}: {label}")
            if result is not None:
                out.append(result)
        for k, bound in enumerate(pc.accept_rate_by_position or (), 1):
            result = _bounded(bound, metrics, phase_metric(position_metric(k), phase),
                              f"{phase}: draft position {k} acceptance rate")
            if result is not None:
                out.append(result)
        if pc.no_decline is not None:
            tau, p = metrics.get(phase_metric("accept_trend_tau", phase)), metrics.get(phase_metric("accept_trend_p", phase))
            name = f"{phase}: acceptance length does not decline over time"
            if tau is None or p is None:
                out.append(CheckResult(name, held=False, detail=f"{phase}: too few requests to test a trend (8 needed)"))
            else:
                declining = tau < 0 and p < pc.no_decline
                out.append(CheckResult(name, held=not declining, detail=(
                    f"{phase}: acceptance length declines over time (Kendall's tau {tau:.2f}, one-sided p {p:.2g} "
                    f"< {pc.no_decline:g})") if declining else ""))
    for cross in checks.across_phases:
        value = metrics.get(phase_metric(cross.metric, cross.phase))
        base = metrics.get(phase_metric(cross.metric, cross.baseline))
        name = f"{cross.phase} {cross.metric} >= {cross.min_ratio:g} x {cross.baseline}"
        if value is None or base is None:
            missing = cross.phase if value is None else cross.baseline
            out.append(CheckResult(name, held=False, detail=f"{cross.metric} of phase {missing} was not measured"))
            continue
        held = value >= cross.min_ratio * base
        out.append(CheckResult(name, held=held, detail="" if held else (
            f"{cross.phase} {cross.metric} {value:.3g} < {cross.min_ratio:g} x {cross.baseline} {base:.3g} "
            f"(= {cross.min_ratio * base:.3g})")))
    return out
