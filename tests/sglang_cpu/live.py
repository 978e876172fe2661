"""A real SGLang server on the CPU for tests: started from the harness's CPU build, observed, stopped.

The releases tried are ``$SGLANG_REPRO_CPU_RELEASES`` (comma-separated), default :data:`DEFAULT_RELEASES`: the
ones measured to serve this way. Each server runs in a session of its own and dies with the test process
(``dies_with_parent``), so a killed pytest worker leaves no SGLang tree behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from harness.build.sglang_cpu import ensure_cpu_env, server_environment
from harness.build.sglang_cpu.launch import server_argv
from harness.contract import facts as contract
from harness.server.lease import PortLease, lease_port
from harness.util.kill import dies_with_parent, signal_group, signal_process

__all__ = ["DEFAULT_RELEASES", "CpuServer", "Stopped", "releases", "running_server", "start_cpu_server", "stop_cpu_server"]

# Measured to serve this way; 0.5.18 and 0.5.19 (the SIGTERM exit boundary) serve too but are not defaults: each
# release adds two servers to the run (docs/builds.md). 0.5.16, 0.5.17 and 0.5.20 are untried.
DEFAULT_RELEASES = ("0.5.14", "0.5.15", "0.5.21")
READY_TIMEOUT_S = 240.0  # two loaded cores: the first start of a release compiles nothing but imports a lot


# 0.5.14-0.5.15 derive a gRPC port as --port + 10000 and refuse one above 65535 (server_args.py 0.5.14 :2761-2769)
# even with gRPC off: a server's port must stay at or below 55535.
_MAX_PORT = 55535
_LEASES: list[PortLease] = []


def server_port() -> int:
    """A free port for a server, leased until this process ends, low enough for every release."""
    lease = lease_port(start=random.randint(20000, _MAX_PORT - 200))
    if lease.port > _MAX_PORT:
        lease.release()
        return server_port()
    _LEASES.append(lease)
    return lease.port


def releases() -> tuple[str, ...]:
    text = os.environ.get("SGLANG_REPRO_CPU_RELEASES", "").strip()
    return tuple(v.strip() for v in text.split(",") if v.strip()) if text else DEFAULT_RELEASES


@dataclass
class CpuServer:
    """A real SGLang server started by :func:`start_cpu_server`."""

    version: str
    proc: subprocess.Popen[bytes]
    port: int
    log: Path
    api_key: str | None = None
    ready_s: float | None = None
    health_before_ready: list[int] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def tree(self) -> list[psutil.Process]:
        try:
            parent = psutil.Process(self.proc.pid)
            return [parent, *parent.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def request(self, method: str, path: str, body: object = None, *, timeout: float = 60.0, auth: bool = True,
                ) -> tuple[int, bytes, float]:
        """(status, body, seconds) of one HTTP call; with ``auth`` the server's API key as a bearer token."""
        headers = {"Content-Type": "application/json"}
        if auth and self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        started = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=timeout) as answer:
                return answer.status, answer.read(), time.monotonic() - started
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read(), time.monotonic() - started

    def json(self, method: str, path: str, body: object = None, *, timeout: float = 60.0) -> object:
        status, data, _ = self.request(method, path, body, timeout=timeout)
        assert status == 200, f"sglang {self.version} {method} {path}: HTTP {status} {data[:300]!r}"
        return json.loads(data)

    def generate(self, body: dict[str, object], *, timeout: float = 120.0) -> dict[str, object]:
        answer = self.json("POST", contract.GENERATE_PATH, body, timeout=timeout)
        assert isinstance(answer, dict), answer
        return answer


def start_cpu_server(version: str, model: Path, log: Path, extra: Sequence[str] = (), *, api_key: str | None = None,
                     env: dict[str, str] | None = None, timeout: float = READY_TIMEOUT_S,
                     defaults: Sequence[str] | None = None) -> CpuServer:
    """Launch real sglang ``version`` on the CPU and wait for its ready line; while waiting, poll ``/health`` and
    keep the statuses seen before the ready line. AssertionError (with the log's tail) when it exits first."""
    venv = ensure_cpu_env(version)
    port = server_port()
    flags = [*extra, *(["--api-key", api_key] if api_key else [])]
    argv = server_argv(venv, model, port, flags) if defaults is None else server_argv(venv, model, port, flags,
                                                                                       defaults=defaults)
    full_env = {**os.environ, **server_environment(venv), "PYTHONUNBUFFERED": "1", **(env or {})}
    started = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=full_env, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=dies_with_parent(os.getpid()))
    server = CpuServer(version, proc, port, log, api_key)
    deadline = started + timeout
    while contract.READY_LINE not in server.log_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_cpu_server(server)
            raise AssertionError(f"real sglang {version} on CPU did not log its ready line (rc={proc.poll()}):\n"
                                 f"{server.log_text()[-4000:]}")
        if contract.UVICORN_RUNNING in server.log_text():
            with contextlib.suppress(OSError):
                status, _, _ = server.request("GET", contract.HEALTH_PATH, timeout=2.0, auth=False)
                if contract.READY_LINE not in server.log_text():
                    server.health_before_ready.append(status)
        time.sleep(0.1)
    server.ready_s = time.monotonic() - started
    return server


@dataclass(frozen=True)
class Stopped:
    """How a server ended: the launcher's wait status, seconds from the signal to the whole tree gone, survivors."""

    returncode: int | None
    seconds: float
    tree: tuple[str, ...]  # the names of the tree's processes before the signal
    survivors: tuple[str, ...]


def stop_cpu_server(server: CpuServer, sig: int = signal.SIGTERM, *, grace: float = 60.0) -> Stopped:
    """Send ``sig`` to the launcher only (as the harness does), wait for the whole tree to end, then SIGKILL what
    is left (reported as survivors)."""
    tree = server.tree()
    names = tuple(_name(p) for p in tree)
    started = time.monotonic()
    if server.proc.poll() is None:
        signal_process(server.proc.pid, sig)
    deadline = started + grace
    while time.monotonic() < deadline and (server.proc.poll() is None or any(_alive(p) for p in tree)):
        time.sleep(0.05)
    seconds = time.monotonic() - started
    survivors = tuple(_name(p) for p in tree if _alive(p))
    for process in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    signal_group(server.proc.pid, signal.SIGKILL)  # its own session: whatever of the tree psutil no longer saw
    with contextlib.suppress(subprocess.TimeoutExpired):
        server.proc.wait(timeout=10)
    return Stopped(server.proc.returncode, seconds, names, survivors)


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _name(process: psutil.Process) -> str:
    try:
        return f"{process.pid}:{process.name()}"
    except psutil.NoSuchProcess:
        return f"{process.pid}:?"


@contextlib.contextmanager
def running_server(version: str, model: Path, log: Path, extra: Sequence[str] = (), **kwargs: object,
                   ) -> Iterator[CpuServer]:
    server = start_cpu_server(version, model, log, extra, **kwargs)  # type: ignore[arg-type]
    try:
        yield server
    finally:
        if server.proc.poll() is None:
            stop_cpu_server(server)
