"""The typed records one run's phases hand each other, and the two ways a run ends early for its caller.

Each phase returns one of these (frozen) and its caller files it in the run's :class:`Trail` as it arrives, so a
phase cut short still leaves what came before it to the run record (:mod:`harness.pipeline.record`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.build import Build, BuildFailure
from harness.launch.launcher import Launcher
from harness.measure.server_side import AttentionBackends
from harness.records.manifest import Manifest
from harness.records.run_record import RunRecord, RunVerdict, TeardownInfo
from harness.scenario import Case
from harness.server.lease import DEFAULT_GPU_LEASE_TIMEOUT_S
from harness.server.pool import LiveServer, ServerPool
from harness.server.process import ServerProcess
from harness.signatures.catalogue import Catalogue
from harness.workload.phases import PhasePlan
from harness.workload.prompts import Prompt

__all__ = ["Driven", "Launched", "Plan", "Ready", "Resolved", "RunContext", "RunDiskFull", "RunInterrupted",
           "RunOptions", "RunPaths", "Scraped", "Trail", "Unresolved"]


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
