"""One server process from start to a verified-clean teardown.

    ServerProcess(...)          NEW
      .start()                  RUNNING   own session, log to file, log watched live, watchdog armed
      .wait_ready() -> seconds            health 200 or the ready line; ServerDied / StartupTimeout fail fast
      .failure() -> reason|None           cheap check for the workload loop
      .stop() -> TeardownInfo STOPPED   TERM, grace, KILL group + tagged escapees, port free, GPUs released

A ``ServerProcess`` is used once; calling ``start`` again (or ``wait_ready`` after ``stop``) raises.
``with ServerProcess(...) as server:`` starts it and stops it on exit; the caller still calls ``wait_ready``.

Death is noticed three ways: the process exits, a log line makes ``on_line`` return non-None (a crash
signature, checked live as lines are written), or the caller's own checks. ``died`` is set at once in the first
two cases, so a crash reaches its verdict within about 50 ms of the line, not at the next health poll.
"""

from __future__ import annotations

import enum
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import psutil

from harness.contract.facts import HEALTH_PATH, HEALTH_PROBE_TIMEOUT_S, READY_LINE
from harness.records.run_record import TeardownInfo
from harness.server import hardware, http
from harness.server.lease import port_is_free
from harness.server.reaper import TAG_VAR, Watchdog, kill_run
from harness.util.atomic import write_atomic
from harness.util.bounded_read import tail_lines
from harness.util.errors import EXIT_INFRA, HarnessError, InfraError
from harness.util.interrupts import Shield
from harness.util.kill import dies_with_parent, signal_group
from harness.util.net import url_for
from harness.util.redact import redact_text, redact_values, register_secrets, secret_flag_values, secret_values
from harness.util.text import last_line

if TYPE_CHECKING:  # the catalogue (and yaml) load only where a matcher is made
    from harness.signatures.catalogue import Match

__all__ = [
    "ServerProcess",
    "ServerState",
    "ServerDied",
    "StartupTimeout",
    "READY_LINE",
]

log = logging.getLogger(__name__)

_HEALTH_POLL_S = 0.1
# SGLang's /health runs a one-token generation and answers after >= 1 s (harness.contract.facts): a shorter
# timeout never sees a 200, and readiness would rest on the ready log line, which --log-level warning
# hides. The probe runs in its own thread, so a hung server cannot delay a crash verdict.
_HEALTH_TIMEOUT_S = HEALTH_PROBE_TIMEOUT_S


class ServerDied(HarnessError):
    """The server exited or logged a crash signature before it was ready."""

    def __init__(self, message: str, *, server_exit_code: int | None, crash_match: Match | None,
                 log_tail: str) -> None:
        super().__init__(message)
        # Not ``exit_code``: that is HarnessError's exit code of the harness itself (a crash is EXIT_FAIL).
        self.server_exit_code = server_exit_code
        self.crash_match = crash_match
        self.log_tail = log_tail


class StartupTimeout(HarnessError):
    """The server neither became ready nor died within the start-up bound (outcome ``timeout``)."""

    exit_code = EXIT_INFRA

    def __init__(self, message: str, *, timeout_s: float, log_tail: str) -> None:
        super().__init__(message)
        self.timeout_s = timeout_s
        self.log_tail = log_tail


class ServerState(enum.Enum):
    NEW = "new"
    RUNNING = "running"
    STOPPED = "stopped"


_MAX_LINE = 1 << 20
_DRAIN_S = 0.5  # after the server exits, how long its last output may take to reach the watcher


def _listeners(port: int) -> set[int | None]:
    """PIDs listening on ``port`` (None for a socket whose owner this user may not see)."""
    try:
        conns = psutil.net_connections(kind="inet")
    except (psutil.Error, OSError):
        return set()
    return {c.pid for c in conns if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN}


class ServerProcess:
    """A server started in its own session, watched live, and torn down with nothing left behind.

    ``env`` is the server's complete environment; ``SGLANG_REPRO_RUN=<run_tag>`` is added to it so every
    descendant can be found later. ``on_line`` sees each log line as it is written; its first non-None
    answer becomes ``crash_match`` and marks the server dead. ``gpu_indices`` are the NVML indices the
    server was given, waited on at teardown until its processes leave them.

    If the harness dies, the server dies with it: by the parent-death signal (when ``start`` ran on the
    main thread) and by the watchdog, which also finds tagged processes that left the process group.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        host: str,
        port: int,
        log_path: Path,
        run_tag: str,
        startup_timeout_s: float,
        health_paths: Sequence[str] = (HEALTH_PATH,),
        ready_line: str | None = READY_LINE,
        on_line: Callable[[str], Match | None] | None = None,
        gpu_indices: Sequence[int] = (),
    ) -> None:
        if not argv:
            raise ValueError("argv is empty")
        if not run_tag or "\0" in run_tag or "=" in run_tag:
            raise ValueError(f"run_tag {run_tag!r} must be non-empty, without '=' or NUL")
        self.argv = tuple(argv)
        self.env = {**env, TAG_VAR: run_tag}
        self.host = host
        self.port = port
        self.log_path = Path(log_path)
        self.run_tag = run_tag
        self.startup_timeout_s = startup_timeout_s
        self.health_paths = tuple(health_paths)
        self.ready_line = ready_line
        self.on_line = on_line
        self.gpu_indices = tuple(gpu_indices)

        self.state = ServerState.NEW
        self.died = threading.Event()  # process exited or a crash line matched
        self.ready = threading.Event()
        self.crash_match: Match | None = None
        self.crash_line: str | None = None
        self.died_at: float | None = None  # time.time() when death was noticed
        self.ready_via: str | None = None  # "health:/path" or "log"
        # The HTTP server answered a health probe (503 while SGLang warms up counts): the warm-up had begun.
        # Evidence that does not depend on --log-level, unlike uvicorn's line.
        self.http_answered = False
        self._exit_code: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._watchdog: Watchdog | None = None
        self._started_mono = 0.0
        self._ready_s: float | None = None
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._gpu_baseline: dict[int, float] = {}
        self._report: TeardownInfo | None = None
        self._lock = threading.Lock()
        self._secrets: frozenset[str] = frozenset()
        self._log_done = threading.Event()
        self.log_error: str | None = None  # why the log could not be written in full (a full disk)

    # ----- lifecycle -----

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def watchdog_pid(self) -> int | None:
        return self._watchdog.pid if self._watchdog else None

    @property
    def exit_code(self) -> int | None:
        return self._exit_code

    @property
    def url(self) -> str:
        return url_for(self.host, self.port)

    def start(self) -> None:
        """Launch the server; returns at once (``wait_ready`` waits)."""
        if self.state is not ServerState.NEW:
            raise RuntimeError(f"ServerProcess is {self.state.value}; it can be started once, make a new one")
        self.state = ServerState.RUNNING
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.gpu_indices:
            self._gpu_baseline = hardware.gpu_memory_used_mib(self.gpu_indices)
        self._started_mono = time.monotonic()
        self._watchdog = Watchdog(self.run_tag)
        # The log goes through the harness, redacted line by line as it is written: a harness killed mid-run
        # leaves no secret (SGLang logs its whole server_args, --api-key included) in server.log.
        self._secrets = secret_values(self.env) | secret_flag_values(self.argv)
        register_secrets(self._secrets)  # and every later artifact of this process drops them by value
        write_atomic(self.log_path, "")  # a fresh log; never through a link or device left at its name
        try:
            self._proc = subprocess.Popen(
                list(self.argv),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
                preexec_fn=dies_with_parent(os.getpid()),
            )
        except OSError as exc:
            self._watchdog.disarm()
            self.state = ServerState.STOPPED
            raise InfraError(f"cannot start server {self.argv[0]!r}: {exc.strerror or exc}") from None
        self._watchdog.add_group(self._proc.pid)
        # argv may carry secrets (--api-key); the redacting artifact writer records it, not this log.
        log.info("started server pid %d (run %s): %s", self._proc.pid, self.run_tag, self.argv[0])
        for target, name in ((self._watch_log, "log"), (self._watch_exit, "exit"), (self._poll_health, "health")):
            thread = threading.Thread(target=target, name=f"server-{name}-{self._proc.pid}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def wait_ready(self) -> float:
        """Seconds from start to ready. On death or time-out the server is torn down, then the error raised."""
        if self.state is not ServerState.RUNNING:
            raise RuntimeError(f"ServerProcess is {self.state.value}; wait_ready needs a started server")
        deadline = self._started_mono + self.startup_timeout_s
        while True:
            if self.died.is_set():
                self.stop()
                raise self._died_error()
            if self.ready.is_set():
                return self._ready_s if self._ready_s is not None else time.monotonic() - self._started_mono
            if time.monotonic() >= deadline:
                tail = self.log_tail(40)
                self.stop()
                last = last_line(tail, empty="")
                raise StartupTimeout(
                    f"server not ready after {self.startup_timeout_s:g} s"
                    + (f"; last log line: {last}" if last else "; log is empty"),
                    timeout_s=self.startup_timeout_s,
                    log_tail=tail,
                )
            self.died.wait(0.02)

    def wait_listening(self, timeout_s: float) -> bool:
        """Whether the server's port is bound (waiting up to ``timeout_s`` while the server lives).

        Ready by SGLang's log line is not yet listening: with ``--skip-server-warmup`` SGLang logs its ready line from
        a thread FastAPI's lifespan starts, before uvicorn binds the socket (srt/entrypoints/http_server.py 0.5.15: the
        thread started at :379-383, its skip branch logs the line at :2162-2169 without waiting; 0.5.14 :371-375 and
        :2138-2145 alike). On two loaded cores the first request then met a refused connection in about one run of
        three on the real-SGLang CPU build. The workload waits for the socket first.
        """
        deadline = time.monotonic() + timeout_s
        while port_is_free(self.host, self.port):
            if self.died.is_set() or time.monotonic() >= deadline:
                return False
            self.died.wait(0.02)
        return True

    def failure(self) -> str | None:
        """Why the server is dead (crash line or exit), or None while it looks alive."""
        if not self.died.is_set():
            return None
        if self.crash_match is not None:
            return f"server logged a crash: {self.crash_line}"
        return f"server exited with code {self._exit_code}"

    def stop(
        self, grace_s: float = 5.0, port_free_timeout_s: float = 30, gpu_release_timeout_s: float = 60
    ) -> TeardownInfo:
        """TERM the run, KILL what is left after ``grace_s``, then wait for the port and GPUs to be free.

        Idempotent: a second call returns the first report. A SIGINT or SIGTERM that arrives meanwhile does not
        cut the teardown short of its record: it SIGKILLs the server's group at once (the grace is over) and
        is raised when the teardown is done (:class:`harness.util.interrupts.Shield`).
        """
        with Shield(on_signal=self._hurry), self._lock:
            if self._report is not None:
                return self._report
            began = time.monotonic()
            if self.state is ServerState.NEW or self._proc is None:
                self.state = ServerState.STOPPED
                self._report = TeardownInfo(port_freed=True)
                return self._report
            self.state = ServerState.STOPPED
            proc = self._proc
            result = kill_run(self.run_tag, {proc.pid}, grace_s=grace_s)
            try:
                self._exit_code = proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                log.error("server pid %d not reaped after SIGKILL", proc.pid)
            self._stopping.set()
            for thread in self._threads:
                # The health probe may sit in a request to whatever holds the port (up to its timeout): it is a
                # daemon that sees _stopping after that request, so teardown does not wait for it.
                if not thread.name.startswith("server-health"):
                    thread.join(timeout=5)
            if self._watchdog is not None:
                self._watchdog.disarm()
            own = {proc.pid, *result.terminated, *result.killed, *result.escaped}
            port_freed = self._wait_port_free(port_free_timeout_s, own)
            gpu_released = None
            if self.gpu_indices:
                gpu_released = hardware.wait_gpu_released(
                    (proc.pid, *result.terminated), self.gpu_indices, gpu_release_timeout_s,
                    baseline_used_mib=self._gpu_baseline,
                )
            self._report = TeardownInfo(
                exit_code=self._exit_code,
                terminated=result.terminated,
                killed=result.killed,
                escaped=result.escaped,
                leftover=result.leftover,
                port_freed=port_freed,
                gpu_released=gpu_released,
                duration_s=round(time.monotonic() - began, 3),
            )
            log.info("stopped server pid %d: %s", proc.pid, self._report)
            return self._report

    def _hurry(self) -> None:
        """A later signal during teardown: no more grace, SIGKILL the server's process group now."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            signal_group(proc.pid, signal.SIGKILL)

    # ----- log and health -----

    def log_tail(self, n_lines: int = 40) -> str:
        """The last ``n_lines`` lines of the server log (reads at most the last 256 KiB)."""
        return "\n".join(tail_lines(self.log_path, n_lines))

    def _mark_died(self) -> None:
        if not self.died.is_set():
            self.died_at = time.time()
            self.died.set()

    def _handle_line(self, line: str) -> None:
        if self.ready_line and not self.ready.is_set() and self.ready_line in line:
            self._set_ready("log")
        if self.on_line is None or self.crash_match is not None:
            return
        try:
            match = self.on_line(line)
        except Exception:  # a faulty matcher must not blind the watcher
            log.exception("on_line failed on %r", line)
            return
        if match is not None:
            self.crash_match = match
            self.crash_line = line
            log.info("server pid %s logged a crash: %s", self.pid, line)
            self._mark_died()

    def _watch_log(self) -> None:
        """Pump the server's output: each line redacted into the log file and shown to the matcher at once."""
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        pending = b""
        with open(self.log_path, "ab", buffering=0) as out:
            while True:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    chunk = b""
                if chunk:
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    if len(pending) > _MAX_LINE:  # a line without end: cut it rather than hold it all
                        lines.append(pending)
                        pending = b""
                    for raw in lines:
                        self._log_line(out, raw)
                    continue
                # End of output: every process that held the pipe is gone (or closed it).
                if pending:
                    self._log_line(out, pending)
                self._log_done.set()
                return

    def _watch_exit(self) -> None:
        """The server process exiting is death, even while a descendant still holds the output pipe."""
        assert self._proc is not None
        code = self._proc.wait()
        self._exit_code = code
        # Let the pump show the matcher what was written before the exit: a crash line wins over a bare exit.
        self._log_done.wait(_DRAIN_S)
        log.info("server pid %d exited with code %d", self._proc.pid, code)
        self._mark_died()

    def _log_line(self, out: Any, raw: bytes) -> None:
        line = redact_text(redact_values(raw.decode(errors="replace").rstrip("\r"), self._secrets))
        try:
            out.write(line.encode() + b"\n")
        except OSError as exc:  # a full disk: keep watching; the run reports what it could not keep
            self.log_error = self.log_error or f"writing {self.log_path}: {exc.strerror or exc}"
        self._handle_line(line)

    def _set_ready(self, via: str) -> None:
        with_ready = time.monotonic() - self._started_mono
        if not self.ready.is_set():
            self._ready_s = with_ready
            self.ready_via = via
            self.ready.set()
            log.info("server pid %s ready after %.2f s (%s)", self.pid, with_ready, via)

    def _poll_health(self) -> None:
        if not self.health_paths:
            return
        while not (self.ready.is_set() or self.died.is_set() or self._stopping.is_set()):
            for path in self.health_paths:
                try:
                    status = http.get(self.url + path, timeout_s=_HEALTH_TIMEOUT_S).status
                    self.http_answered = True
                    if status == 200:
                        self._set_ready(f"health:{path}")
                        return
                except (OSError, ValueError):
                    pass  # not listening yet, or no answer in time (503 while starting is a reply)
            self._stopping.wait(_HEALTH_POLL_S)

    # ----- teardown helpers -----

    def _died_error(self) -> ServerDied:
        tail = self.log_tail(40)
        if self.crash_match is not None:
            message = f"server logged a crash before it was ready: {self.crash_line}"
        else:
            last = last_line(tail, empty="")
            message = f"server exited with code {self._exit_code} before it was ready" + (
                f"; last log line: {last}" if last else "; log is empty"
            )
        return ServerDied(message, server_exit_code=self._exit_code, crash_match=self.crash_match, log_tail=tail)

    def _wait_port_free(self, timeout_s: float, own: set[int]) -> bool:
        holders = _listeners(self.port)
        if holders and None not in holders and not holders & own:
            # Another process holds the port (the server never bound it): nothing of this run to wait for.
            log.warning("port %s:%d is held by pid %s, not by this run", self.host, self.port,
                        ", ".join(str(p) for p in sorted(h for h in holders if h is not None)))
            return False
        deadline = time.monotonic() + timeout_s
        while not port_is_free(self.host, self.port):
            if time.monotonic() >= deadline:
                log.warning("port %s:%d still in use %.0f s after teardown", self.host, self.port, timeout_s)
                return False
            time.sleep(0.1)
        return True


