"""ServerProcess against real server processes (tests/servers/*.py): readiness, fail-fast, teardown."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.server.lease import lease_port, port_is_free
from harness.server.process import ServerDied, ServerProcess, ServerState, StartupTimeout
from harness.server.reaper import kill_run, run_pids
from harness.signatures.catalogue import Match, Signature
from harness.util.errors import HarnessError, InfraError

SERVERS = Path(__file__).parent / "servers"

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _locks(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_REPRO_LOCK_DIR", str(tmp_path_factory.getbasetemp() / "locks"))


@pytest.fixture
def tag() -> Iterator[str]:
    run_tag = f"test-{uuid.uuid4().hex}"
    yield run_tag
    # Whatever a test did, nothing of its run may outlive it.
    leftover = run_pids(run_tag)
    kill_run(run_tag, grace_s=0, kill_wait_s=2)
    assert not leftover, f"processes of run {run_tag} outlived the test: {sorted(leftover)}"


@pytest.fixture
def port() -> Iterator[int]:
    with lease_port() as lease:
        yield lease.port


def _server(script: str, *args: object, tag: str, port: int, tmp_path: Path, **kw: object) -> ServerProcess:
    kw.setdefault("startup_timeout_s", 15)
    return ServerProcess(
        [sys.executable, str(SERVERS / script), *map(str, args)],
        env=dict(os.environ),
        host="127.0.0.1",
        port=port,
        log_path=tmp_path / "server.log",
        run_tag=tag,
        **kw,  # type: ignore[arg-type]
    )


_TEST_CRASH = Signature("test-crash", "the test server crashed", "bug", (), re.compile("test server crashed"))


def _crash_matcher(line: str) -> Match | None:
    if not line.startswith("RuntimeError: test server crashed"):
        return None
    return Match(_TEST_CRASH, 0, line, line)


def _can_bind(port: int) -> bool:
    # SO_REUSEADDR like every server: TIME_WAIT left by the health polls must not count as "in use".
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen(1)
        except OSError:
            return False
    return True


def test_ready_via_a_slow_health_answer_without_a_ready_line(tag: str, port: int, tmp_path: Path) -> None:
    # SGLang's /health generates one token and answers after >= 1 s; at --log-level warning no ready line
    slow = 1.5
    server = _server("healthy.py", "--port", port, "--answer-after", slow, tag=tag, port=port, tmp_path=tmp_path)
    with server:
        assert server.wait_ready() >= slow
        assert server.ready_via == "health:/health"
        assert "ready to roll" not in (tmp_path / "server.log").read_text()


def test_reference_server_at_log_level_warning_becomes_ready_via_health(tag: str, port: int, tmp_path: Path) -> None:
    # no ready line at --log-level warning; SGLang's /health (modelled) answers after its generation
    argv = [sys.executable, "-m", "harness.sim.server", "--model-path", "google/gemma-4-E4B-it", "--log-level",
            "warning", "--sim-revision", "post-fix", "--host", "127.0.0.1", "--port", str(port)]
    server = ServerProcess(argv, env=dict(os.environ), host="127.0.0.1", port=port, log_path=tmp_path / "server.log",
                           run_tag=tag, startup_timeout_s=120)
    with server:
        server.wait_ready()
        assert server.ready_via == "health:/health"
        assert "ready to roll" not in (tmp_path / "server.log").read_text()


def test_ready_via_health_and_port_free_after_stop(tag: str, port: int, tmp_path: Path) -> None:
    server = _server("healthy.py", "--port", port, "--health-delay", 0.3, tag=tag, port=port, tmp_path=tmp_path)
    with server:
        seconds = server.wait_ready()
        assert server.ready_via == "health:/health"
        assert 0.3 <= seconds < 15
        assert server.failure() is None
        assert not _can_bind(port)  # the server really holds it
        pid = server.pid
    report = server.stop()  # idempotent: same report as the one __exit__ made
    assert report.port_freed and _can_bind(port)
    assert pid in report.terminated and report.leftover == ()
    assert report.exit_code is not None
    assert server.state is ServerState.STOPPED


def test_ready_via_log_line_only(tag: str, port: int, tmp_path: Path) -> None:
    with _server("log_ready.py", 0.3, tag=tag, port=port, tmp_path=tmp_path) as server:
        assert server.wait_ready() >= 0.3
        assert server.ready_via == "log"
    assert run_pids(tag) == {}


def test_hung_server_times_out_and_is_torn_down(tag: str, port: int, tmp_path: Path) -> None:
    server = _server("hung.py", port, tag=tag, port=port, tmp_path=tmp_path, startup_timeout_s=1.5)
    began = time.monotonic()  # before start(): the start-up bound counts from inside it
    server.start()
    with pytest.raises(StartupTimeout) as info:
        server.wait_ready()
    assert 1.5 <= time.monotonic() - began < 1.5 + 5 + 3  # the bound, then at most the grace and the reaping
    assert "not ready after 1.5 s" in str(info.value)
    assert "hung test server" in info.value.log_tail
    assert server.state is ServerState.STOPPED
    assert run_pids(tag) == {}
    assert port_is_free("127.0.0.1", port)


def test_crash_line_before_ready_fails_within_one_second(tag: str, port: int, tmp_path: Path) -> None:
    server = _server(
        "crash.py", "--crash-after", 0.3, tag=tag, port=port, tmp_path=tmp_path, on_line=_crash_matcher,
        health_paths=(),
    )
    server.start()
    with pytest.raises(ServerDied) as info:
        server.wait_ready()
    raised_at = time.time()
    crash_line = re.search(r"CRASH_AT (\S+)", server.log_tail(100))
    assert crash_line is not None
    line_at = float(crash_line.group(1))
    assert server.died_at is not None and server.died_at - line_at < 1.0
    assert raised_at - line_at < 1.0, f"verdict {raised_at - line_at:.2f} s after the crash line"
    crash = info.value.crash_match
    assert crash is not None and crash.signature.id == "test-crash"
    assert info.value.server_exit_code is not None  # torn down before raising, so it has one now
    assert "crashed on purpose" in str(info.value)
    assert run_pids(tag) == {}


def test_crash_after_ready_is_noticed_live(tag: str, port: int, tmp_path: Path) -> None:
    with _server(
        "crash.py", "--ready", "--crash-after", 0.5, tag=tag, port=port, tmp_path=tmp_path, on_line=_crash_matcher,
    ) as server:
        server.wait_ready()
        assert server.failure() is None
        assert server.died.wait(10)
        crash_line = re.search(r"CRASH_AT (\S+)", server.log_tail(100))
        assert crash_line is not None
        line_at = float(crash_line.group(1))
        assert server.died_at is not None and server.died_at - line_at < 1.0
        failure = server.failure()
        assert failure is not None and "crashed on purpose" in failure
        assert server.exit_code is None  # still running: only the log told us
        with pytest.raises(ServerDied):
            server.wait_ready()


def test_early_exit_reports_exit_code(tag: str, port: int, tmp_path: Path) -> None:
    server = _server("exit_early.py", 7, tag=tag, port=port, tmp_path=tmp_path)
    server.start()
    began = time.monotonic()
    with pytest.raises(ServerDied) as info:
        server.wait_ready()
    assert time.monotonic() - began < 5
    assert info.value.server_exit_code == 7 and info.value.crash_match is None
    assert "exited with code 7" in str(info.value) and "always fails" in str(info.value)


def test_stop_kills_setsid_grandchild_by_tag(tag: str, port: int, tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    with _server("escape.py", "--pid-file", pid_file, tag=tag, port=port, tmp_path=tmp_path, health_paths=()) as s:
        s.wait_ready()
        grandchild = int(pid_file.read_text())
        assert s.pid is not None and os.getpgid(grandchild) != s.pid  # it really left the server's group
        assert run_pids(tag, {s.pid})[grandchild] is False
        report = s.stop(grace_s=0.5)
    assert grandchild in report.escaped
    assert grandchild in report.killed  # it ignores SIGTERM, so only SIGKILL removed it
    assert report.leftover == ()
    assert not os.path.exists(f"/proc/{grandchild}") or _is_zombie(grandchild)


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2] == "Z"


def test_sigkilled_harness_leaves_no_tagged_process(tag: str, port: int, tmp_path: Path) -> None:
    parent = subprocess.Popen(
        [sys.executable, str(SERVERS / "harness_parent.py"), "--tag", tag, "--port", str(port),
         "--workdir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )
    assert parent.stderr is not None
    try:
        deadline = time.monotonic() + 20
        while not (tmp_path / "pids.json").exists():
            assert parent.poll() is None, parent.stderr.read().decode()
            assert time.monotonic() < deadline, "harness stand-in never got its server ready"
            time.sleep(0.05)
        pids = json.loads((tmp_path / "pids.json").read_text())
        assert set(run_pids(tag)) >= {pids["server"], pids["grandchild"]}
        parent.send_signal(signal.SIGKILL)
        parent.wait(5)
        killed_at = time.monotonic()
        while run_pids(tag) and time.monotonic() - killed_at < 5:
            time.sleep(0.05)
        assert run_pids(tag) == {}, "tagged processes survived their harness by 5 s"
        assert time.monotonic() - killed_at < 5
        watchdog_deadline = time.monotonic() + 5
        while not _is_zombie(pids["watchdog"]) and time.monotonic() < watchdog_deadline:
            time.sleep(0.05)
        assert _is_zombie(pids["watchdog"]), "the watchdog did not exit after its job"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(5)


def test_state_machine_refuses_reuse(tag: str, port: int, tmp_path: Path) -> None:
    server = _server("log_ready.py", 0.0, tag=tag, port=port, tmp_path=tmp_path)
    with pytest.raises(RuntimeError, match="needs a started server"):
        server.wait_ready()
    with server:
        server.wait_ready()
        with pytest.raises(RuntimeError, match="started once"):
            server.start()
    with pytest.raises(RuntimeError, match="stopped"):
        server.start()
    with pytest.raises(RuntimeError, match="stopped"):
        server.wait_ready()


def test_missing_executable_is_infra_error(tag: str, port: int, tmp_path: Path) -> None:
    server = ServerProcess(
        [str(tmp_path / "no-such-server")], env={}, host="127.0.0.1", port=port,
        log_path=tmp_path / "server.log", run_tag=tag, startup_timeout_s=5,
    )
    with pytest.raises(InfraError, match="cannot start server"):
        server.start()
    assert isinstance(InfraError("x"), HarnessError)
    assert server.state is ServerState.STOPPED
    assert server.watchdog_pid is not None and _is_zombie(server.watchdog_pid)
