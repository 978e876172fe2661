"""One run: one case x one build x one trial, from pre-flight to ``result.json``.

The flow (design.md): resolve build -> pre-flight (flags parsed by the build's own parser; model
present; hardware present) -> lease GPUs and a port -> start the server in its own process group,
log to a file watched live -> ready or fail fast -> workload, still watching for death and
signatures -> scrape server-side metrics -> teardown -> decide the outcome -> write artifacts.
Every phase is bounded by the scenario's timeouts, and every phase ends in a verdict.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import time
import urllib.request
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness import __version__, hardware
from harness.artifacts import new_run_dir, redact_file, write_env, write_repro, write_result
from harness.build import Build, describe_environment, parse_build_spec, resolve_build
from harness.errors import HarnessError, InfraError
from harness.lease import gpu_env, lease_gpus, lease_port
from harness.metrics import aggregate, metric_value, scrape_metrics, server_accept_length
from harness.expectation import run_holds
from harness.outcome import Outcome
from harness.legacy_outcome import RunResult, Verdict, evaluate_checks
from harness.paths import resolve_fixture
from harness.preflight import check_flags, model_gap
from harness.prompts import Prompt, fit_token_ids, prompt_lengths, random_id_prompts, text_prompts
from harness.redact import redact_argv, redact_env, redact_log
from harness.scenario import Case, server_flags
from harness.scenario.model import TokenRange
from harness.server import ServerDied, ServerProcess, StartupTimeout
from harness.signatures import Catalogue, last_traceback
from harness.workload import WorkloadResult, request_body, run_workload

__all__ = ["RunOptions", "build_prompts", "execute_run"]

log = logging.getLogger(__name__)

_GPU_LEASE_TIMEOUT_S = 1800.0
_EXCERPT_CHARS = 6000
_DEADLINE = "scenario deadline reached"


@dataclass(frozen=True)
class RunOptions:
    out_root: Path | None = None
    progress: bool | None = None
    gpu_lease_timeout_s: float = _GPU_LEASE_TIMEOUT_S
    catalogue: Catalogue | None = None
    # GPUs the caller already holds a lease on (the pytest plugin leases per item, across its
    # trials): the run uses exactly these and leases none itself.
    gpus: tuple[int, ...] | None = None


def build_prompts(case: Case, build: Build, trial: int) -> list[Prompt]:
    """The same seeded prompts for every build and every trial (warmup ones first): trials then differ
    only by the machine's noise, which is what the statistics of a comparison are about."""
    wl = case.scenario.workload
    spec = wl.prompt
    tokens: Any = range(spec.tokens.start, spec.tokens.stop, spec.tokens.step) if isinstance(
        spec.tokens, TokenRange) else spec.tokens
    seed = spec.seed
    lengths = prompt_lengths(tokens, wl.warmup + wl.requests, seed)
    if spec.source == "random-ids":
        return random_id_prompts(lengths, seed=seed, vocab=spec.vocab)
    fixture = resolve_fixture(spec.fixture or "", relative_to=case.file.parent)
    if fixture is None:
        raise InfraError(f"prompt fixture {spec.fixture!r} not found")
    text = fixture.read_text()
    if build.is_reference:
        # The reference server tokenizes bytes; its own tokenizer gives exact counts without any download.
        from harness.sim.tokenizer import ByteTokenizer

        tok = ByteTokenizer()
        ids = tok.encode(text)
        return [Prompt(input_ids=fit_token_ids(ids, n, seed=seed, index=i), text=None, tokens=n)
                for i, n in enumerate(lengths)]
    return text_prompts(lengths, text=text, tokenizer_path=case.scenario.server.model, seed=seed)


def _watched(case: Case, catalogue: Catalogue) -> list[str] | None:
    """Signatures the live watcher looks for: the scenario's, plus every infra one (they decide infra)."""
    chosen = case.scenario.checks.crash_signatures
    if chosen == "all":
        return None
    infra = [s.id for s in catalogue.signatures if s.kind == "infra"]
    return list(dict.fromkeys([*chosen, *infra]))


def _hardware_gap(case: Case) -> str | None:
    hw = case.scenario.hardware
    return hardware.requirement_gap(hardware.inventory(), count=hw.gpus, name_pattern=hw.gpu_name,
                                    min_memory_gib=hw.min_memory_gib, min_compute_capability=hw.min_compute_capability)


def _resolve(case: Case, spec: str | Build) -> Build:
    """The build to run; raises InfraError when it cannot be had (nothing is launched then)."""
    if isinstance(spec, Build):
        return spec
    parsed = parse_build_spec(spec)
    if parsed.kind == "pip" and parsed.fields.get("deps", "full") == "full":
        # Creating a full environment pulls the GPU stack (gigabytes): not on a host that cannot run it.
        gap = _hardware_gap(case)
        if gap:
            raise InfraError(f"pre-flight: hardware: {gap}; the environment of {spec} was not created")
    return resolve_build(parsed)


def _unresolved(spec: str | Build) -> Build:
    if isinstance(spec, Build):
        return spec
    parsed = parse_build_spec(spec)
    return Build(kind=parsed.kind, spec=parsed.spec, python="", launcher=(), is_reference=parsed.kind == "sim")


def _preflight(case: Case, build: Build, flags: list[str]) -> str | None:
    """Why this run cannot even be tried, or None. Nothing is launched here."""
    check = check_flags(build, flags)
    if not check.ok:
        return f"pre-flight: {build.spec} rejects the flags: {check.message}"
    sc = case.scenario
    load_format = sc.server.args.get("load-format")
    for model in filter(None, (sc.server.model, sc.server.draft_model)):
        gap = model_gap(model, load_format=str(load_format) if load_format else None, is_reference=build.is_reference)
        if gap:
            return f"pre-flight: {gap}"
    if not build.is_reference:
        gap = _hardware_gap(case)
        if gap:
            return f"pre-flight: hardware: {gap}"
    return None


def _get_json(url: str, timeout_s: float = 5.0) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310 - loopback URL we built
            data = json.loads(resp.read())
            return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def _server_side(server: ServerProcess, case: Case, build: Build) -> tuple[dict[str, Any], dict[str, Any] | None]:
    metrics: dict[str, Any] = {"accept_length_server": server_accept_length(server.url)}
    if case.scenario.server.args.get("enable-metrics"):
        scraped = scrape_metrics(server.url)
        metrics["prometheus_spec_accept_length"] = metric_value(scraped, "sglang:spec_accept_length")
    truth = _get_json(f"{server.url}/sim/stats") if build.is_reference else None
    return metrics, truth


def _first_failing_request(result: WorkloadResult | None, prompts: list[Prompt], case: Case) -> dict[str, Any] | None:
    wl = case.scenario.workload
    if not prompts:
        return None
    index = 0
    if result is not None:
        failed = [r.index for r in result.records if not r.ok]
        index = failed[0] if failed else 0
    return request_body(prompts[index], max_new_tokens=wl.max_new_tokens, ignore_eos=wl.ignore_eos,
                        temperature=wl.temperature, stream=wl.stream)


def _crash_verdict(match: Any, log_text: str, exit_code: int | None, when: str) -> Verdict:
    if match is not None:
        sig = match.signature
        outcome = "infra" if sig.kind == "infra" else "crash"
        return Verdict(outcome, sig.id, f"{when}: {sig.title}: {match.line.strip()[:300]}",
                       redact_log(match.excerpt)[-_EXCERPT_CHARS:])
    tb = last_traceback(log_text)
    last = tb.strip().splitlines()[-1] if tb else None
    detail = f"; last exception: {last[:300]}" if last else "; no traceback in the log"
    excerpt = tb or "\n".join(log_text.splitlines()[-20:])
    return Verdict("crash", "unknown", f"{when}: server exited with code {exit_code}{detail}",
                   redact_log(excerpt)[-_EXCERPT_CHARS:])


def execute_run(
    case: Case,
    build_spec: str | Build,
    *,
    role: str | None = None,
    trial: int = 0,
    options: RunOptions | None = None,
) -> RunResult:
    """Run ``case`` on one build once and return its result (also written to ``result.json``)."""
    opts = options or RunOptions()
    verdict: Verdict | None = None
    try:
        build = _resolve(case, build_spec)
    except InfraError as exc:
        build = _unresolved(build_spec)
        verdict = Verdict("infra", None, str(exc).splitlines()[0])
    if build.is_reference:
        case = case.for_reference()
    sc = case.scenario
    started = time.monotonic()
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    deadline = started + sc.timeouts.scenario_s
    catalogue = opts.catalogue or Catalogue.load()
    label = role or build.kind
    run_dir = new_run_dir(sc.name, case.name, f"{label}-{build.version or build.kind}", trial, opts.out_root)
    log_path = run_dir / "server.log"
    jsonl_path = run_dir / "requests.jsonl"
    tag = f"{run_dir.name}-{secrets.token_hex(4)}"

    server: ServerProcess | None = None
    workload: WorkloadResult | None = None
    metrics: dict[str, Any] = {}
    truth: dict[str, Any] | None = None
    teardown: dict[str, Any] = {}
    prompts: list[Prompt] = []
    argv: list[str] = []
    env_overlay: dict[str, str] = {}
    port = 0

    if verdict is None:  # the build is at hand: try
        try:
            prompts = build_prompts(case, build, trial)
            with ExitStack() as stack:
                port_lease = stack.enter_context(lease_port(sc.server.host))
                port = port_lease.port
                flags = server_flags(sc, port=port)
                argv = [*build.launcher, *flags]
                gap = _preflight(case, build, flags)
                if gap:
                    verdict = Verdict("infra", None, gap)
                else:
                    gpu_indices: Sequence[int] = ()
                    env_overlay = {**build.env, **sc.server.env}
                    if not build.is_reference and sc.hardware.gpus and opts.gpus is not None:
                        gpu_indices = tuple(opts.gpus)
                        env_overlay.update(gpu_env(gpu_indices))
                    elif not build.is_reference and sc.hardware.gpus:
                        inventory = [g.index for g in hardware.inventory()]
                        gpus = stack.enter_context(lease_gpus(sc.hardware.gpus, inventory,
                                                              timeout_s=opts.gpu_lease_timeout_s))
                        gpu_indices = gpus.indices
                        env_overlay.update(gpus.env)
                    matcher = catalogue.stream(_watched(case, catalogue))
                    startup_s = min(sc.timeouts.startup_s, max(1.0, deadline - time.monotonic()))
                    server = ServerProcess(
                        argv, env={**os.environ, **env_overlay}, host=sc.server.host, port=port,
                        log_path=log_path, run_tag=tag, startup_timeout_s=startup_s, on_line=matcher.feed,
                        gpu_indices=gpu_indices,
                    )
                    verdict, workload, metrics, truth = _serve(server, case, build, prompts, jsonl_path,
                                                               deadline, opts)
                    teardown = _teardown(server)
        except HarnessError as exc:
            # Whatever stopped the harness itself (a build that cannot be made, a lease that timed out,
            # a tokenizer that is missing) means the product was never tried: infra.
            verdict = Verdict("infra", None, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        finally:
            # Also on a bug or Ctrl-C: never leave a server behind in a long-lived process (pytest).
            if server is not None and not teardown:
                teardown = _teardown(server)

    assert verdict is not None
    checks_report: list[dict[str, Any]] = []
    if verdict.outcome == "pass":
        failed = evaluate_checks(sc.checks, metrics)
        checks_report = [{"check": text, "held": False} for text in failed]
        if failed:
            verdict = Verdict("fail", None, "; ".join(failed))
    redact_file(log_path)
    try:
        env_info = describe_environment(build) if build.python else {"build": build.spec, "error": "not resolved"}
    except HarnessError as exc:
        env_info = {"error": str(exc)}
    env_info["host"] = hardware.host_info()
    write_env(run_dir, env_info)
    if argv:
        write_repro(run_dir, argv=argv, env=env_overlay, host=sc.server.host, port=port,
                    request=_first_failing_request(workload, prompts, case),
                    note=f"{sc.name} / {case.name} on {build.spec}: {verdict.outcome} ({verdict.reason})")
    expectation = None
    if role and role in sc.expect:
        exp = sc.expect[role]
        expectation = {"role": role, "expected": exp.describe(),
                       "held": run_holds(exp, Outcome(verdict.outcome), verdict.signature, None)}
    result = RunResult(
        scenario={"name": sc.name, "file": str(case.file)},
        case={"name": case.name, "values": case.values},
        build={"kind": build.kind, "spec": build.spec, "version": build.version, "commit": build.commit,
               "role": role, "reference_server": build.is_reference},
        trial=trial,
        outcome=verdict.outcome,
        signature=verdict.signature,
        reason=verdict.reason,
        metrics=metrics,
        server={"argv": redact_argv(argv), "env": redact_env(env_overlay), "log": str(log_path),
                "exit_code": server.exit_code if server else None, "teardown": teardown, "run_tag": tag},
        host=env_info["host"],
        started_at=started_at,
        duration_s=round(time.monotonic() - started, 3),
        harness_version=__version__,
        artifacts=str(run_dir),
        excerpt=verdict.excerpt,
        checks=checks_report,
        expectation=expectation,
        ground_truth=truth,
    )
    write_result(run_dir, result)
    return result


def _serve(
    server: ServerProcess,
    case: Case,
    build: Build,
    prompts: list[Prompt],
    jsonl_path: Path,
    deadline: float,
    opts: RunOptions,
) -> tuple[Verdict, WorkloadResult | None, dict[str, Any], dict[str, Any] | None]:
    """Start, wait for ready, drive the workload; the verdict of everything up to teardown."""
    sc = case.scenario
    wl = sc.workload
    server.start()
    try:
        ready_s = server.wait_ready()
    except ServerDied as exc:
        return _crash_verdict(exc.crash_match, server.log_tail(400), exc.exit_code, "start-up"), None, {}, None
    except StartupTimeout as exc:
        return Verdict("timeout", None, f"start-up: {exc}"), None, {}, None
    log.info("server ready in %.1f s at %s", ready_s, server.url)

    def should_abort() -> str | None:
        # The scenario bound goes through the same path as a dying server, so the records so far are kept.
        failure = server.failure()
        if failure:
            return failure
        return _DEADLINE if time.monotonic() >= deadline else None

    result = asyncio.run(run_workload(
        server.url, prompts, concurrency=wl.concurrency, request_rate=wl.request_rate,
        max_new_tokens=wl.max_new_tokens, ignore_eos=wl.ignore_eos, temperature=wl.temperature,
        stream=wl.stream, warmup=wl.warmup, request_timeout_s=sc.timeouts.request_s, jsonl_path=jsonl_path,
        should_abort=should_abort, seed=sc.workload.prompt.seed, progress=opts.progress,
    ))
    metrics: dict[str, Any] = {"ready_s": round(ready_s, 3)}
    metrics.update(aggregate(result.records, result.measured_wall_s))
    # A crash line can trail the last failed request slightly: give the watcher a moment when anything failed.
    if server.died.wait(0.3 if any(not r.ok for r in result.records) else 0.0) or server.failure():
        return (_crash_verdict(server.crash_match, server.log_tail(400), server.exit_code, "during workload"),
                result, metrics, None)
    if result.aborted == _DEADLINE:
        return (Verdict("timeout", None, f"scenario bound of {sc.timeouts.scenario_s:g} s reached during the workload"),
                result, metrics, None)
    server_metrics, truth = _server_side(server, case, build)
    metrics.update(server_metrics)
    timeouts = [r for r in result.records if not r.ok and r.error and "timeout" in r.error.lower()]
    if timeouts and len(timeouts) == sum(1 for r in result.records if not r.ok):
        return Verdict("timeout", None, f"{len(timeouts)} request(s) hit the {sc.timeouts.request_s:g} s bound"), \
            result, metrics, truth
    return Verdict("pass", None, "all checks held"), result, metrics, truth


def _teardown(server: ServerProcess) -> dict[str, Any]:
    report = server.stop()
    return {"exit_code": report.exit_code, "killed": list(report.killed), "escaped": list(report.escaped),
            "leftover": list(report.leftover), "port_freed": report.port_freed,
            "gpu_released": report.gpu_released, "duration_s": round(report.duration_s, 3)}
