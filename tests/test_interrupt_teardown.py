"""The teardown of an interrupted run (issue 24, item 4): the reference server ends itself on the harness's
SIGTERM as SGLang's launcher does, inside the grace, so the harness SIGKILLs nothing.

It used to take 5.1 s every time: the server ignored SIGTERM while streams were open and was SIGKILLed
(``exit_code`` -9, ``teardown.killed`` the server and its scheduler). The harness's SIGTERM goes to the
server's whole process group. The front logs SGLang's SIGTERM line and drains; the scheduler, which has no
SIGTERM handler in SGLang, dies at once, and the front notices as SGLang's SubprocessWatchdog does
(harness.contract.facts CHILD_CRASHED_LINE). Whichever comes first, the drain's end or the dead child (a request
still open, the harness's own /health probe among them, keeps the drain going), the front SIGKILLs its own
tree and itself, as SGLang's ``kill_process_tree(os.getpid(), include_parent=True)`` does: the exit status
is -9 on both ways (SIGTERM_SELF_KILL, CHILD_FAILED_SELF_KILL), but ``teardown.killed`` is empty.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from harness.contract import facts as contract
from tests.test_interrupt import API_KEY, REPO, _run_processes, _scenario, _wait_for

pytestmark = pytest.mark.slow

GRACE_S = 5.0  # harness.server.process.ServerProcess.stop's default


def _wait_for_requests(out: Path, timeout_s: float = 60) -> None:
    """Until the server runs a request of the workload: SGLang's SIGTERM handler is installed by the first
    request (this scenario skips the warm-up), and before it uvicorn's own stops the server."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for log in [*out.glob("**/runs/*/server.log"), *out.glob("**/servers/*/server.log")]:
            found = re.search(r"Uvicorn running on (http://127\.0\.0\.1:\d+)", log.read_text(errors="replace"))
            if found is None:
                continue
            try:
                ask = urllib.request.Request(found.group(1) + "/sim/stats", headers={"Authorization": f"Bearer {API_KEY}"})
                with urllib.request.urlopen(ask, timeout=5) as answer:
                    if json.loads(answer.read())["running"] > 0:
                        return
            except (OSError, ValueError):
                pass
        time.sleep(0.1)
    pytest.fail("the workload never reached the server")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_an_interrupted_run_tears_down_without_sigkill(tmp_path: Path, sig: int) -> None:
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "harness", "run", str(_scenario(tmp_path)), "--case", "tokens=276,path=graph",
            "--build", "sim:post-fix", "--out", str(out)]
    harness = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(out, ready=True)
        _wait_for_requests(out)  # the workload's streams are open now
        began = time.monotonic()
        harness.send_signal(sig)
        stdout, stderr = harness.communicate(timeout=60)
        took = time.monotonic() - began
        assert harness.returncode == 3, stdout[-2000:] + stderr[-2000:]
        [result] = list(out.glob("**/runs/*/result.json"))
        record = json.loads(result.read_text())
        teardown = record["server"]["teardown"]
        assert record["outcome"] == "interrupted" and record["phase"] == "workload", record
        assert teardown["killed"] == [], teardown  # the server stopped on SIGTERM, inside the grace
        assert teardown["duration_s"] < GRACE_S, teardown
        assert record["server"]["exit_code"] == contract.SIGTERM_SELF_KILL == contract.CHILD_FAILED_SELF_KILL
        log = Path(record["server"]["log"]).read_text(errors="replace")
        assert contract.SIGTERM_LINE in log and "kill_process_tree called:" in log
        assert not _run_processes(out)
        print(f"{signal.Signals(sig).name}: exit {harness.returncode} after {took:.2f} s, teardown {teardown}")
    finally:
        if harness.poll() is None:
            harness.kill()
        for proc in _run_processes(out):
            proc.kill()


@pytest.mark.parametrize("command", ["run", "compare"])
def test_the_interrupted_record_is_stored_with_its_phase(tmp_path: Path, command: str) -> None:
    """compare stores its interrupted record as run does (it used to keep it out of the store), with the
    phase the signal found it in; and it exits 3, as any interrupt."""

    out = tmp_path / "out"
    build = ["--build", "sim:post-fix"] if command == "run" else ["--reference"]
    argv = [sys.executable, "-m", "harness", command, str(_scenario(tmp_path)), "--case", "tokens=276,path=graph",
            *build, "--out", str(out)]
    env = {k: v for k, v in os.environ.items() if k != "SGLANG_REPRO_STORE"}  # the default store, in OUT
    harness = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        _wait_for(out, ready=True)
        _wait_for_requests(out)
        harness.send_signal(signal.SIGTERM)
        stdout, stderr = harness.communicate(timeout=60)
        assert harness.returncode == 3, stdout[-2000:] + stderr[-2000:]
        with sqlite3.connect(out / "results.db") as db:
            rows = db.execute("SELECT outcome, phase FROM runs").fetchall()
        assert ("interrupted", "workload") in rows, rows
    finally:
        if harness.poll() is None:
            harness.kill()
        for proc in _run_processes(out):
            proc.kill()
