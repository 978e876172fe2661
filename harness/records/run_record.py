"""The run record: what one run (one case x one build x one trial) was and what came of it.

``result.json`` is this record at the edge: :func:`record_to_json` writes it, :func:`read_record`
reads it back, and everything between (compare, reports, the pytest plugin, the store) uses the
typed record. The reader is tolerant: it loads every earlier schema version (version 1 had no
``run_id``, ``phase`` or ``experiment``, and held the expectation as a plain dict).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.records.manifest import Manifest
from harness.records.outcome import EXIT_CODE, Outcome, Phase, parse_outcome, parse_phase
from harness.util.errors import UserError

__all__ = [
    "RECORD_SCHEMA_VERSION",
    "BuildRef",
    "CaseRef",
    "CheckResult",
    "ExpectationResult",
    "HostInfo",
    "RunRecord",
    "RunVerdict",
    "ScenarioRef",
    "ServerInfo",
    "TeardownInfo",
    "experiment_digest",
    "host_from_dict",
    "host_to_dict",
    "read_record",
    "record_from_dict",
    "record_to_dict",
]

RECORD_SCHEMA_VERSION = 2


@dataclass(frozen=True)
class RunVerdict:
    """What a run ended in, before it is written down: the outcome, where it arose, and why."""

    outcome: Outcome
    reason: str
    phase: Phase | None = None
    signature: str | None = None
    excerpt: str = ""  # the crash's log lines (a traceback), already redacted


@dataclass(frozen=True)
class ScenarioRef:
    name: str
    file: str
    sets: tuple[str, ...] = ()  # the --set overrides it ran with (secrets as ${VAR} references)


@dataclass(frozen=True)
class CaseRef:
    name: str
    values: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BuildRef:
    kind: str
    spec: str
    version: str | None = None
    commit: str | None = None
    role: str | None = None
    reference_server: bool = False
    # What the build is (harness.contract.profile): fix present, eager rule, ...; or {"unavailable": why}.
    profile: Mapping[str, Any] | None = None
    # What the build is when it is not SGLang on the scenario's hardware (harness.build.labels): "reference server
    # (CPU model, not SGLang)" or "real SGLang, plain-torch kernels on CPU"; None for a real build on its hardware
    # and in a record written before labels were kept (harness.build.labels.build_label tells it from the spec).
    label: str | None = None


@dataclass(frozen=True)
class TeardownInfo:
    """What a server's teardown found and did: returned by ``ServerProcess.stop`` and kept in the run record
    as it is (the one teardown record; a code-shape test keeps it one)."""

    exit_code: int | None = None
    killed: tuple[int, ...] = ()  # still alive after the grace period, sent SIGKILL
    escaped: tuple[int, ...] = ()  # found by the run tag outside the process group
    leftover: tuple[int, ...] = ()  # survived even SIGKILL (should be empty)
    port_freed: bool | None = None
    gpu_released: bool | None = None  # None when the server had no GPUs
    duration_s: float = 0.0
    terminated: tuple[int, ...] = ()  # every process of the run that was sent SIGTERM


@dataclass(frozen=True)
class ServerInfo:
    argv: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    log: str = ""
    exit_code: int | None = None
    run_tag: str = ""
    teardown: TeardownInfo | None = None
    # The attention backends the server ran (decode side; the speculative draft's) and where that was learnt:
    # "server_info" (what the server resolved), "flags" or "log" (harness.measure.server_side.AttentionBackends).
    attention_backend: str | None = None
    draft_attention_backend: str | None = None
    attention_backend_source: str | None = None


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    uuid: str | None = None
    memory_gib: float | None = None
    compute_capability: str | None = None


@dataclass(frozen=True)
class HostInfo:
    hostname: str = ""
    gpus: tuple[GpuInfo, ...] = ()
    driver_version: str | None = None
    cuda_version: str | None = None
    cuda_visible_devices: str | None = None
    platform: str = ""
    python: str = ""
    cpu_count: int | None = None
    cpu: str | None = None
    python_executable: str = ""

    @property
    def gpu_names(self) -> tuple[str, ...]:
        return tuple(g.name for g in self.gpus)

    @property
    def hardware_key(self) -> str:
        """What a metric series is keyed by: the GPUs (count x name), or when there are none the CPU
        (core count x model); the platform string (kernel, glibc) only for a host that names no CPU."""
        if self.gpus:
            names = sorted(set(self.gpu_names))
            return f"{len(self.gpus)}x{'+'.join(names)}"
        if self.cpu:
            return f"cpu:{self.cpu_count}x{self.cpu}" if self.cpu_count else f"cpu:{self.cpu}"
        return f"cpu:{self.platform or 'unknown'}"


@dataclass(frozen=True)
class CheckResult:
    check: str
    held: bool
    detail: str = ""


@dataclass(frozen=True)
class ExpectationResult:
    role: str
    expected: str
    held: bool
    status: str = "confirmed"  # confirmed | hypothesis
    premise: str = ""  # why the build is not the one the expectation's profile: describes (empty: it is, or none)


@dataclass(frozen=True)
class RunRecord:
    """One run; ``record_to_dict`` is the ``result.json`` contract of design.md."""

    run_id: str
    scenario: ScenarioRef
    case: CaseRef
    build: BuildRef
    trial: int
    outcome: Outcome
    signature: str | None
    reason: str
    metrics: Mapping[str, float | None]
    server: ServerInfo
    host: HostInfo
    started_at: str
    duration_s: float
    harness_version: str
    artifacts: str
    phase: Phase | None = None
    excerpt: str = ""
    checks: tuple[CheckResult, ...] = ()
    expectation: ExpectationResult | None = None
    ground_truth: Mapping[str, Any] | None = None
    experiment: str = ""  # digest of server argv (host/port left out) + workload: "the same experiment"
    timings: Mapping[str, float] = field(default_factory=dict)  # seconds per phase (resolve, preflight, start...)
    manifest: Manifest | None = None  # the workload as sent: like is compared with like
    schema_version: int = RECORD_SCHEMA_VERSION

    @property
    def exit_code(self) -> int:
        return EXIT_CODE[self.outcome]

    def metric(self, name: str) -> float | None:
        value = self.metrics.get(name)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def experiment_digest(server_flags: Sequence[str], workload: Mapping[str, Any]) -> str:
    """A stable digest of what was run: server flags without host and port, and the workload settings."""
    flags: list[str] = []
    skip = False
    for item in server_flags:
        if skip:
            skip = False
            continue
        name = item.split("=", 1)[0]
        if name in ("--host", "--port"):
            skip = "=" not in item
            continue
        flags.append(item)
    text = json.dumps({"flags": flags, "workload": workload}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- the edge: dicts and files


def _plain(value: Any) -> Any:
    if isinstance(value, (Outcome, Phase)):
        return value.value
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def record_to_dict(record: RunRecord) -> dict[str, Any]:
    data = asdict(record)
    data["outcome"] = record.outcome.value
    data["phase"] = record.phase.value if record.phase else None
    data["host"] = host_to_dict(record.host)
    plain: dict[str, Any] = _plain(data)
    return plain


def host_to_dict(host: HostInfo) -> dict[str, Any]:
    """The host as ``result.json`` and ``env.json`` hold it: design.md lists GPU names under ``gpus``, the
    details stay beside them (``gpu_details``)."""
    data = asdict(host)
    data["gpu_details"] = data.pop("gpus")
    data["gpus"] = list(host.gpu_names)
    return data


def _teardown(data: Any) -> TeardownInfo | None:
    if not isinstance(data, Mapping) or not data:
        return None
    return TeardownInfo(
        exit_code=data.get("exit_code"),
        killed=tuple(data.get("killed") or ()),
        escaped=tuple(data.get("escaped") or ()),
        leftover=tuple(data.get("leftover") or ()),
        port_freed=data.get("port_freed"),
        gpu_released=data.get("gpu_released"),
        duration_s=float(data.get("duration_s") or 0.0),
        terminated=tuple(data.get("terminated") or ()),
    )


def host_from_dict(data: Any) -> HostInfo:
    """The host part of any ``result.json`` version."""
    if not isinstance(data, Mapping):
        return HostInfo()
    details = data.get("gpu_details")
    if details is None:  # a host without details: names only
        details = [{"index": i, "name": n} for i, n in enumerate(data.get("gpus") or [])]
    gpus = tuple(GpuInfo(index=int(g.get("index", i)), name=str(g.get("name", "")), uuid=g.get("uuid"),
                         memory_gib=g.get("memory_gib"), compute_capability=(
                             None if g.get("compute_capability") is None else str(g.get("compute_capability"))))
                 for i, g in enumerate(details) if isinstance(g, Mapping))
    return HostInfo(
        hostname=str(data.get("hostname") or ""), gpus=gpus, driver_version=data.get("driver_version"),
        cuda_version=data.get("cuda_version"), cuda_visible_devices=data.get("cuda_visible_devices"),
        platform=str(data.get("platform") or ""), python=str(data.get("python") or ""),
        cpu_count=data.get("cpu_count"), cpu=data.get("cpu"),
        python_executable=str(data.get("python_executable") or ""),
    )


def _expectation(data: Any) -> ExpectationResult | None:
    if not isinstance(data, Mapping):
        return None
    return ExpectationResult(role=str(data.get("role") or ""), expected=str(data.get("expected") or ""),
                             held=bool(data.get("held")), status=str(data.get("status") or "confirmed"),
                             premise=str(data.get("premise") or ""))


def record_from_dict(data: Mapping[str, Any], *, source: str = "result.json") -> RunRecord:
    """A record from any schema version of ``result.json``; UserError naming ``source`` when it is not one."""
    try:
        version = int(data.get("schema_version", 1))
        if version > RECORD_SCHEMA_VERSION:
            raise UserError(f"{source}: schema_version {version} is newer than this harness reads "
                            f"(<= {RECORD_SCHEMA_VERSION}); upgrade sglang-repro")
        scenario, case, build, server = (data.get(k) or {} for k in ("scenario", "case", "build", "server"))
        artifacts = str(data.get("artifacts") or "")
        metrics = {str(k): (v if isinstance(v, (int, float)) and not isinstance(v, bool) else None)
                   for k, v in (data.get("metrics") or {}).items()}
        return RunRecord(
            run_id=str(data.get("run_id") or server.get("run_tag") or Path(artifacts).name or "unknown"),
            scenario=ScenarioRef(name=str(scenario.get("name", "")), file=str(scenario.get("file", "")),
                                 sets=tuple(str(x) for x in scenario.get("sets") or () if isinstance(x, str))),
            case=CaseRef(name=str(case.get("name", "")), values=dict(case.get("values") or {})),
            build=BuildRef(kind=str(build.get("kind", "")), spec=str(build.get("spec", "")),
                           version=build.get("version"), commit=build.get("commit"), role=build.get("role"),
                           reference_server=bool(build.get("reference_server", False)),
                           profile=build.get("profile") if isinstance(build.get("profile"), dict) else None,
                           label=str(build["label"]) if build.get("label") else None),
            trial=int(data.get("trial", 0)),
            outcome=parse_outcome(data["outcome"]),
            signature=data.get("signature"),
            reason=str(data.get("reason") or ""),
            metrics=metrics,
            server=ServerInfo(argv=tuple(server.get("argv") or ()), env=dict(server.get("env") or {}),
                              log=str(server.get("log") or ""), exit_code=server.get("exit_code"),
                              run_tag=str(server.get("run_tag") or ""), teardown=_teardown(server.get("teardown")),
                              attention_backend=_str_or_none(server.get("attention_backend")),
                              draft_attention_backend=_str_or_none(server.get("draft_attention_backend")),
                              attention_backend_source=_str_or_none(server.get("attention_backend_source"))),
            host=host_from_dict(data.get("host")),
            started_at=str(data.get("started_at") or ""),
            duration_s=float(data.get("duration_s") or 0.0),
            harness_version=str(data.get("harness_version") or ""),
            artifacts=artifacts,
            phase=parse_phase(data.get("phase")),
            excerpt=str(data.get("excerpt") or ""),
            checks=tuple(CheckResult(check=str(c.get("check", "")), held=bool(c.get("held")),
                                     detail=str(c.get("detail") or ""))
                         for c in data.get("checks") or () if isinstance(c, Mapping)),
            expectation=_expectation(data.get("expectation")),
            ground_truth=data.get("ground_truth"),
            experiment=str(data.get("experiment") or ""),
            timings={str(k): float(v) for k, v in (data.get("timings") or {}).items()},
            manifest=Manifest.from_dict(data["manifest"]) if isinstance(data.get("manifest"), Mapping) else None,
            schema_version=RECORD_SCHEMA_VERSION,
        )
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise UserError(f"{source}: not a run record: {exc}") from None


def read_record(path: Path) -> RunRecord:
    """``result.json`` (or the run folder holding it) as a record."""
    from harness.util.bounded_read import read_json  # a regular file, capped, depth-capped JSON

    if path.is_dir():
        path = path / "result.json"
    try:
        data = read_json(path, "record")
    except UserError as exc:
        raise UserError(f"{exc}; cannot read a run record") from None
    if not isinstance(data, Mapping):
        raise UserError(f"{path}: not a run record: top level is not an object")
    return record_from_dict(data, source=str(path))


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
