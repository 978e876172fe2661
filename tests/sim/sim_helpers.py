"""Helpers for the reference server's tests: flag sets, and real server processes on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psutil

from tests.helpers import free_port

REPO = Path(__file__).resolve().parents[2]
READY = "The server is fired up and ready to roll!"

SPEC_31B = ["--model-path", "google/gemma-4-31B-it", "--speculative-algorithm", "NEXTN",
            "--speculative-draft-model-path", "google/gemma-4-31B-it-assistant", "--speculative-eagle-topk", "1"]
EAGER_28264 = [*SPEC_31B, "--speculative-num-steps", "1", "--speculative-num-draft-tokens", "2", "--disable-cuda-graph",
               "--tp-size", "4", "--enable-hierarchical-cache", "--hicache-ratio", "2", "--mem-fraction-static", "0.85",
               "--context-length", "8192"]
GRAPH_28264 = [*SPEC_31B, "--speculative-num-steps", "5", "--speculative-num-draft-tokens", "6", "--tp-size", "4",
               "--enable-hierarchical-cache", "--hicache-ratio", "2", "--context-length", "8192"]


@dataclass
class SimServer:
    proc: subprocess.Popen
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def tree_pids(self) -> list[int]:
        try:
            parent = psutil.Process(self.proc.pid)
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
    port = free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "harness.sim.server", *args, "--host", "127.0.0.1",
                                 "--port", str(port)], cwd=REPO, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    server = SimServer(proc, port, log)
    if wait_ready:
        deadline = time.monotonic() + timeout
        while READY not in server.log_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                stop_server(server)
                raise AssertionError(f"server did not become ready (rc={proc.poll()}):\n{server.log_text()[-3000:]}")
            time.sleep(0.1)
    return server


def stop_server(server: SimServer) -> None:
    pids = server.tree_pids()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(server.proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        server.proc.wait(timeout=8)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(server.proc.pid, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(pid).kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        server.proc.wait(timeout=5)
