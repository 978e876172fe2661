"""Phase 5 of a run: the typed run record and its artifacts (``result.json``, ``env.json``, ``repro.sh``, this
trial's slice of a shared server's log). A full disk loses artifacts, never the record: it goes to the caller in
:class:`RunDiskFull`.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.build import Build, BuildFailure, describe_environment
from harness.build.labels import build_label
from harness.expectations.judge import judge_run
from harness.launch.build_profile import build_profile
from harness.pipeline.scrape import backends
from harness.pipeline.stages import Resolved, RunDiskFull, RunPaths, Trail, Unresolved
from harness.records.artifacts import write_env, write_record, write_repro
from harness.records.run_record import (
    BuildRef,
    CaseRef,
    CheckResult,
    RunRecord,
    RunVerdict,
    ScenarioRef,
    ServerInfo,
    experiment_digest,
    host_to_dict,
)
from harness.scenario import Case
from harness.server import hardware
from harness.server.hardware import HostInfo
from harness.util.atomic import write_atomic_bytes
from harness.util.bounded_read import read_from
from harness.util.errors import HarnessError
from harness.util.redact import redact_argv, redact_env
from harness.version import harness_version
from harness.workload.prompts import Prompt

__all__ = ["record", "version_label"]

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


def record(resolved: Resolved | Unresolved, trail: Trail, verdict: RunVerdict, checks: tuple[CheckResult, ...],
           paths: RunPaths, *, role: str | None, trial: int, started: float, started_at: str) -> RunRecord:
    """The run's record, written with its artifacts; RunDiskFull (carrying it) when the disk kept any out."""
    record_started = time.monotonic()
    case, build = resolved.case, resolved.build
    sc = case.scenario
    plan, launched, driven = trail.plan, trail.launched, trail.driven
    lost: list[str] = []  # artifacts a full disk kept out: the record still goes to the store, and the command stops
    host = hardware.host_info()
    _artifacts(resolved, trail, verdict, paths, host, lost)
    env_overlay = launched.env_overlay if launched else plan.env_overlay if plan else {}
    build_ref = _build_ref(build, role)
    expectation = (judge_run(role, sc.expect[role], verdict.outcome, verdict.signature, verdict.phase,
                             build_ref.profile) if role and role in sc.expect else None)
    server = launched.server if launched else None
    resolved_backends = backends(trail, paths, sc)
    run_record = RunRecord(
        run_id=paths.tag,
        scenario=ScenarioRef(name=sc.name, file=str(case.file), sets=case.sets),
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
                          **(resolved_backends.as_dict() if resolved_backends else {})),
        host=host,
        started_at=started_at,
        duration_s=round(time.monotonic() - started, 3),
        harness_version=harness_version(),
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
    _kept(lost, "result.json", lambda: write_record(paths.run_dir, run_record))
    if lost:
        raise RunDiskFull(run_record, lost)
    return run_record


def _artifacts(resolved: Resolved | Unresolved, trail: Trail, verdict: RunVerdict, paths: RunPaths, host: HostInfo,
               lost: list[str]) -> None:
    """The run's files beside its record: the server's log, env.json, check_env.json and repro.sh."""
    case, build = resolved.case, resolved.build
    sc = case.scenario
    plan, launched, driven = trail.plan, trail.launched, trail.driven
    # A server logging elsewhere (a pooled one: its own folder) has this run's part copied here, also when the run
    # ended before the pool took it (a start-up interrupted): the record's log path is always a file.
    if launched is not None and launched.server.log_path != paths.log:
        live_log, offset = launched.server.log_path, launched.log_offset
        _kept(lost, "server.log", lambda: _copy_log_slice(live_log, offset, paths.log))
    _kept(lost, "env.json", lambda: write_env(paths.run_dir, {**_environment(build), "host": host_to_dict(host)}))
    _kept(lost, "check_env.json", lambda: _check_env(build, launched is not None, paths.run_dir))
    env_overlay = launched.env_overlay if launched else plan.env_overlay if plan else {}
    if plan is not None and plan.argv:
        index = (driven.failing_request if driven else None) or 0
        request = plan.prompts[index] if plan.prompts else None
        argv, port = plan.argv, plan.port
        _kept(lost, "repro.sh", lambda: write_repro(
            paths.run_dir, argv=argv, env=env_overlay, host=sc.server.host, port=port,
            request=_request_body(request, case) if request else None,
            note=f"{sc.name} / {case.name} on {build.spec}: {verdict.outcome.value} ({verdict.reason})"))


def _check_env(build: Build | BuildFailure, launched: bool, run_dir: Path) -> None:
    """SGLang's bug template asks for ``python -m sglang.check_env``: taken where and when a real server ran."""
    if launched and isinstance(build, Build) and not build.is_reference:
        from harness.build.check_env import capture_check_env

        capture_check_env(build, run_dir)


def _environment(build: Build | BuildFailure) -> dict[str, Any]:
    """``env.json`` but for the host: the build's interpreter described."""
    try:
        return (describe_environment(build) if isinstance(build, Build)
                else {"build": build.spec, "error": "not resolved"})
    except HarnessError as exc:
        return {"error": str(exc)}


def _build_ref(build: Build | BuildFailure, role: str | None) -> BuildRef:
    if isinstance(build, BuildFailure):
        return BuildRef(kind=build.kind, spec=build.spec, role=role, reference_server=build.is_reference,
                        label=build_label(build.spec, reference_server=build.is_reference))
    return BuildRef(kind=build.kind, spec=build.spec, version=build.version, commit=build.commit, role=role,
                    reference_server=build.is_reference, profile=build_profile(build),
                    label=build.label or build_label(build.spec, reference_server=build.is_reference))


def version_label(build: Build | BuildFailure) -> str:
    """The build's part of a run folder's name: its version, else its kind."""
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
