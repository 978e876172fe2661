"""The reference server stops on SIGTERM as SGLang's launcher does (harness.contract.facts SIGTERM_*, issue 24 item 4).

A real server process, a real open stream: SIGTERM is logged, the open request holds the drain (SGLang
drains with no bound of its own), the client going away aborts it, then the scheduler is stopped and the
front SIGKILLs its tree and itself (wait status -9) with nothing left behind; with ``--sim-rules`` 0.5.19 or
later it kills only its children and exits 0, as SGLang does from 0.5.19 (contract.sigterm_exit_status). With
SGL_FORCE_SHUTDOWN the open stream does not hold it.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import time
from pathlib import Path

import pytest

from harness.contract import facts as contract
from harness.util.kill import signal_process
from tests.helpers import start_server, stop_server
from tests.process_marks import alive
from tests.sim.sim_helpers import GRAPH_28264

pytestmark = pytest.mark.slow


def _open_stream(port: int) -> http.client.HTTPConnection:
    """A streaming /generate long enough to be still open seconds later; returns once the first chunk came."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = {"text": "The capital city of France is", "stream": True,
            "sampling_params": {"max_new_tokens": 6000, "ignore_eos": True, "temperature": 0}}
    conn.request("POST", "/generate", json.dumps(body), {"Content-Type": "application/json"})
    response = conn.getresponse()
    assert response.status == 200
    assert response.readline().startswith(b"data: ")
    return conn


def _wait_line(log: Path, text: str, timeout_s: float = 10.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        content = log.read_text(errors="replace")
        if text in content:
            return content
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not logged within {timeout_s} s:\n{log.read_text(errors='replace')[-2000:]}")


@pytest.mark.parametrize(("force", "rules"), [(False, None), (True, None), (False, "0.5.18"), (False, "0.5.19"),
                                              (True, "0.5.21")],
                         ids=["drain", "force", "drain-0.5.18", "drain-0.5.19", "force-0.5.21"])
def test_sigterm_drains_then_the_front_ends_its_tree(tmp_path: Path, force: bool, rules: str | None) -> None:
    if force:
        os.environ[contract.SIGTERM_FORCE_ENV] = "1"  # the server inherits it; removed below
    try:
        server = start_server([*GRAPH_28264, "--sim-revision", "post-fix", "--max-running-requests", "4",
                               *(["--sim-rules", rules] if rules else [])], tmp_path / "server.log")
    finally:
        os.environ.pop(contract.SIGTERM_FORCE_ENV, None)
    conn = None
    try:
        tree = server.tree_pids()
        assert len(tree) >= 2, "the front and its scheduler child"
        conn = _open_stream(server.port)
        began = time.monotonic()
        signal_process(server.pid, signal.SIGTERM)
        _wait_line(server.log, contract.SIGTERM_LINE)
        if not force:
            _wait_line(server.log, f"{contract.SIGTERM_DRAIN_LINE} 1.")
            time.sleep(1.0)
            assert server.poll() is None, "an open request holds SGLang's drain"
            conn.close()  # the client goes away: its request is aborted and the drain ends
        code = server.wait(contract.SIGTERM_SCHEDULER_WAIT_S + 5)
        took = time.monotonic() - began
        # No --sim-rules: 0.5.14's rules, whose launcher SIGKILLs itself.
        assert code == contract.sigterm_exit_status(rules or "0.5.14"), (rules, code)
        assert code == (contract.SIGTERM_CLEAN_EXIT if rules in ("0.5.19", "0.5.21") else contract.SIGTERM_SELF_KILL)
        log = server.log.read_text(errors="replace")
        parent = "include_parent=False" if code == contract.SIGTERM_CLEAN_EXIT else "include_parent=True"
        assert f"kill_process_tree called: parent_pid={server.pid}, {parent}" in log, log[-2000:]
        order = [contract.SIGTERM_LINE, "kill_process_tree called:"]
        if not force:
            order[1:1] = [f"{contract.SIGTERM_DRAIN_LINE} 1.", f"{contract.SIGTERM_DRAIN_LINE} 0."]
        at = [log.find(text) for text in order]
        assert -1 not in at and at == sorted(at), (at, log[-2000:])
        assert ("force shutdown flag set" in log) == force
        deadline = time.monotonic() + 5
        while any(alive(pid) for pid in tree):
            assert time.monotonic() < deadline, "a process of the server outlived it"
            time.sleep(0.05)
        print(f"SIGTERM ({'force' if force else 'drain'}): exit {code} {took:.2f} s after the signal")
    finally:
        if conn is not None:
            conn.close()
        stop_server(server)  # a no-op when the server ended itself
