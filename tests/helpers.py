"""The tests' shared helpers, each defined once (issue 31): a free port, git in a test repository, the cited
files of a release, a reference server process (or its stand-in) on 127.0.0.1 started and ended by the harness's own
server process, a run record.

A port comes from the harness's own lease (:func:`harness.server.lease.lease_port`), held until the test
process ends: a bare ``bind(0)``-and-close hands out a port that a server started by another test (or another
worker) can take before this one binds it.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
import pytest

from harness.contract import facts as contract
from harness.records.outcome import Outcome, Phase
from harness.records.run_record import RunRecord, TeardownInfo, record_from_dict
from harness.server.lease import PortLease, lease_port
from harness.server.process import ServerDied, ServerProcess, StartupTimeout

if TYPE_CHECKING:  # the wheel reader loads only where a test asks for a release
    from harness.contract.wheels import WheelSources

__all__ = ["GIT_IDENTITY", "RECORD_SCENARIO", "SimServer", "copy_cited", "free_port", "git", "make_record", "refused_start",
           "release_wheel", "start_server", "stop_server"]

REPO = Path(__file__).resolve().parent.parent

_LEASES: list[PortLease] = []
# A fixed author and committer: a test repository's commits never depend on the machine's git configuration.
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x.invalid", "GIT_COMMITTER_NAME": "t",
                "GIT_COMMITTER_EMAIL": "t@x.invalid"}


def free_port(host: str = "127.0.0.1") -> int:
    """A port on ``host`` that nothing listens on and no harness run or other test holds, until this process ends."""
    lease = lease_port(host)
    if not _LEASES:
        atexit.register(_release_all)
    _LEASES.append(lease)
    return lease.port


def _release_all() -> None:
    for lease in _LEASES:
        lease.release()


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """``git -C repo args`` with :data:`GIT_IDENTITY` (``env`` laid over the environment instead, when given),
    bounded; an AssertionError with git's message when it fails; stdout stripped."""
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=60,
                          env=env if env is not None else {**os.environ, **GIT_IDENTITY}, check=False)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr.strip()}"
    return done.stdout.strip()


def copy_cited(package: Path, dest: Path) -> Path:
    """The files the contract facts cite, copied from an unpacked release ``package`` into ``dest``; a file cited
    for the other release only is skipped."""
    for name in contract.cited_files():
        if not (package / name).is_file():
            continue
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(package / name, dest / name)
    return dest


def release_wheel(version: str) -> WheelSources:
    """The sources of sglang ``version``'s real wheel (downloaded once into the wheel cache); the test is skipped when
    the wheel cannot be had here (no network, no cache), except under CI, where that is an error."""
    from harness.contract.wheels import WheelSources
    from harness.util.errors import InfraError

    try:
        return WheelSources.of(version)
    except InfraError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"sglang {version}'s wheel cannot be had here: {exc}")


@dataclass
class SimServer:
    """A reference server started by :func:`start_server` on the harness's own :class:`ServerProcess` (its session,
    its redacted log pump, its watchdog, its teardown): its URL, log, exit and plain HTTP calls."""

    process: ServerProcess
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        """The server's front (launcher) process."""
        assert self.process.pid is not None, "the server was never started"
        return self.process.pid

    def poll(self) -> int | None:
        """The front's exit status once the harness's watcher has reaped it (negative for a signal), else None."""
        return self.process.exit_code

    def wait(self, timeout: float) -> int | None:
        """:meth:`poll` after the front exits, or None when it is still running after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.poll()

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def tree_pids(self) -> list[int]:
        try:
            parent = psutil.Process(self.pid)
            return [parent.pid] + [c.pid for c in parent.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def get(self, path: str, timeout: float = 10.0) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def post_raw(self, path: str, body: dict, timeout: float = 30.0) -> bytes:
        """The body of a 200 answer, read to its end (a stream whole)."""
        status, data = self.post(path, body, timeout)
        assert status == 200, (status, data[:300])
        return data

    def post(self, path: str, body: dict, timeout: float = 30.0) -> tuple[int, bytes]:
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()


def start_server(args: list[str], log: Path, wait_ready: bool = True, timeout: float = 60.0) -> SimServer:
    """``python -m harness.sim.server ARGS`` on a free port of 127.0.0.1, started by the harness's own
    :class:`ServerProcess` (a session of its own, dies with this process, a watchdog, the log redacted into ``log``);
    with ``wait_ready``, until its ready line (an AssertionError with the log's tail, the tree stopped, when it exits
    first or ``timeout`` passes). Readiness is the log line alone: no health probe adds a request the test did not
    send. Always :func:`stop_server` it. The tests' one way to start a reference server (tests/test_code_shape.py)."""
    port = free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    process = ServerProcess([sys.executable, "-m", "harness.sim.server", *args, "--host", "127.0.0.1", "--port", str(port)],
                            env=env, host="127.0.0.1", port=port, log_path=log, run_tag=f"test-{os.getpid()}-{port}",
                            startup_timeout_s=timeout, health_paths=(), ready_line=contract.READY_LINE)
    process.start()
    server = SimServer(process, port, log)
    if wait_ready:
        try:
            process.wait_ready()  # on death or time-out it has stopped the tree
        except (ServerDied, StartupTimeout) as exc:
            raise AssertionError(f"server did not become ready ({exc}):\n{server.log_text()[-3000:]}") from None
    return server


def stop_server(server: SimServer) -> TeardownInfo:
    """The harness's own teardown (:meth:`ServerProcess.stop`: TERM, grace, KILL of the group and the tagged
    escapees, the port free); a no-op report when the server was stopped already."""
    return server.process.stop()


def refused_start(args: list[str], log: Path, timeout: float = 60.0) -> tuple[int, str]:
    """A reference server that should refuse to start: its exit status and log once it has ended; an AssertionError
    when it still runs after ``timeout`` seconds (it is stopped either way)."""
    server = start_server(args, log, wait_ready=False)
    try:
        code = server.wait(timeout)
    finally:
        stop_server(server)
    assert code is not None, f"the server did not refuse to start:\n{server.log_text()[-2000:]}"
    return code, server.log_text()


RECORD_SCENARIO = "store-test-scenario"
_AUTO: Any = object()  # a crash's phase defaults to the workload, any other outcome's to none


def make_record(outcome: Outcome | str = Outcome.PASS, *, run_id: str = "run-0", signature: str | None = None,
                phase: Phase | str | None = _AUTO, reason: str | None = None,
                metrics: Mapping[str, float | None] | None = None, case: str = "tokens=276",
                case_values: Mapping[str, Any] | None = None, spec: str = "sim:post-fix", role: str = "after",
                trial: int = 0, version: str | None = "sim-0.1", commit: str | None = None, scenario: str = RECORD_SCENARIO,
                started_at: str = "2026-11-01T00:00:00+00:00", duration_s: float = 1.5, artifacts: str = "",
                argv: Sequence[str] = ("python", "-m", "harness.sim.server", "--port", "30000"), excerpt: str = "",
                harness_version: str = "0.1.0", manifest: Mapping[str, Any] | None = None,
                profile: Mapping[str, Any] | None = None) -> RunRecord:
    """The tests' one run record, built as the harness reads ``result.json`` (``record_from_dict``). ``reason``:
    "all checks held" for a pass, the outcome's name otherwise; ``metrics``: two typical figures."""
    outcome = Outcome(outcome)
    if phase is _AUTO:
        phase = Phase.WORKLOAD if outcome == Outcome.CRASH else None
    return record_from_dict({
        "run_id": run_id, "scenario": {"name": scenario, "file": f"scenarios/{scenario}.yaml"},
        "case": {"name": case, "values": dict(case_values if case_values is not None else {"tokens": 276})},
        "build": {"kind": spec.split(":")[0], "spec": spec, "version": version, "commit": commit, "role": role,
                  "reference_server": spec.startswith("sim:"), **({"profile": dict(profile)} if profile else {})},
        "trial": trial, "outcome": outcome.value, "signature": signature,
        "reason": reason if reason is not None else ("all checks held" if outcome == Outcome.PASS else outcome.value),
        "metrics": dict(metrics if metrics is not None else {"accept_length": 1.8, "output_throughput_tok_s": 200.0}),
        "server": {"argv": list(argv)}, "host": {"hostname": "ci-1", "cpu": "test-cpu", "platform": "linux"},
        "started_at": started_at, "duration_s": duration_s, "harness_version": harness_version,
        "artifacts": artifacts, "phase": None if phase is None else Phase(phase).value, "excerpt": excerpt,
        "experiment": "abc123", "manifest": manifest,
    })
