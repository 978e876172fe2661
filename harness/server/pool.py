"""Servers shared by the trials of a case: started by the first trial, reused by the next ones.

A pool is opened by whoever runs several trials (``compare``, ``run --trials``, a pytest item) and closed
when they are done; every server still in it is torn down then. A server leaves the pool (torn down at
once) after any trial that did not pass, so the next trial meets a fresh server. Starting a server that
needs GPUs first tears down the idle ones that hold GPUs, so interleaved roles never wait on each other.

The server's log belongs to the pool (``<out>/servers/<tag>/server.log``): each trial's artifact folder
gets its own slice of it.
"""

from __future__ import annotations

import json
import logging
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from harness.records.run_record import TeardownInfo
from harness.server.process import ServerProcess

__all__ = ["LiveServer", "ServerPool", "pool_key"]

log = logging.getLogger(__name__)


def pool_key(build_spec: str, flags_without_port: list[str], env: dict[str, str]) -> str:
    """Which trials may share a server: the same build, flags and environment."""
    return json.dumps([build_spec, flags_without_port, sorted(env.items())])


@dataclass
class LiveServer:
    """A started, ready server with the leases it holds."""

    key: str
    server: ServerProcess
    leases: ExitStack
    flags: list[str]
    argv: list[str]
    env_overlay: dict[str, str]
    port: int
    ready_s: float
    gpus: int
    trials: int = 0  # trials it has served
    teardown: TeardownInfo | None = field(default=None)

    @property
    def healthy(self) -> bool:
        return not self.server.died.is_set() and self.server.failure() is None

    def close(self) -> TeardownInfo:
        if self.teardown is None:
            try:
                self.teardown = self.server.stop()
            finally:
                self.leases.close()
        return self.teardown


class ServerPool:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._live: dict[str, LiveServer] = {}

    def __enter__(self) -> ServerPool:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def log_path(self, tag: str) -> Path:
        return self.root / "servers" / tag / "server.log"

    def get(self, key: str) -> LiveServer | None:
        """The healthy server for ``key``; one that died while idle is torn down and forgotten."""
        live = self._live.get(key)
        if live is not None and not live.healthy:
            self.evict(key)
            return None
        return live

    def add(self, live: LiveServer) -> None:
        self._live[live.key] = live

    def make_room(self, gpus: int) -> None:
        """Before starting a server that needs GPUs: tear down the idle ones that hold GPUs."""
        if gpus:
            for key in [k for k, v in self._live.items() if v.gpus]:
                self.evict(key)

    def evict(self, key: str) -> TeardownInfo | None:
        live = self._live.pop(key, None)
        return live.close() if live is not None else None

    def close(self) -> None:
        for key in list(self._live):
            try:
                self.evict(key)
            except Exception:  # one server's teardown problem must not leave the others running
                log.exception("tearing down a pooled server failed")
