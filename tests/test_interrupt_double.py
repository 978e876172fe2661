"""The kill matrix with double signals (issue 24, item 4): a second SIGINT or SIGTERM about a second after the
first, while the run tears down, only hurries the teardown; the record is still written, nothing survives.

Small on purpose (one case, the light workload of tests/test_interrupt.py): each example starts one
reference server. ``SGLANG_REPRO_DOUBLE_SIGNAL_GAP_S`` changes the gap between the two signals.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_interrupt import REPO, _run_processes, _scenario, _wait_for

pytestmark = pytest.mark.slow

GAP_S = float(os.environ.get("SGLANG_REPRO_DOUBLE_SIGNAL_GAP_S", "1.0"))


@pytest.mark.parametrize("command", ["run", "compare", "nightly", "minimize"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_a_second_signal_during_teardown_loses_no_record(tmp_path: Path, command: str, sig: int) -> None:
    out = tmp_path / "out"
    scenario = str(_scenario(tmp_path))
    if command == "compare":
        argv = ["compare", scenario, "--case", "tokens=276,path=graph", "--reference", "--out", str(out)]
    else:
        argv = [command, scenario, "--case", "tokens=276,path=graph", "--build", "sim:post-fix", "--out", str(out)]
    harness = subprocess.Popen([sys.executable, "-m", "harness", *argv], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(out, ready=True)
        time.sleep(1.0)
        assert _run_processes(out), "the server should be running now"
        harness.send_signal(sig)
        time.sleep(GAP_S)
        if harness.poll() is None:
            harness.send_signal(sig)
        began = time.monotonic()
        stdout, stderr = harness.communicate(timeout=60)
        took = time.monotonic() - began
        deadline = time.monotonic() + 10
        while _run_processes(out) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _run_processes(out), "processes of the run survived the harness"
        assert "Traceback" not in stderr, stderr
        results = list(out.glob("**/runs/*/result.json"))
        assert results, f"no record (exit {harness.returncode}): {stdout[-2000:]} {stderr[-2000:]}"
        record = json.loads(results[0].read_text())
        assert record["outcome"] == "interrupted", record["outcome"]
        assert harness.returncode in (3, 130), (harness.returncode, stdout[-2000:], stderr[-2000:])
        if command == "compare":
            assert list(out.glob("compare/*/report.json")), "compare wrote no report"
        if command == "minimize":
            (report,) = list(out.glob("minimize/*/report.md"))
            assert "interrupted" in report.read_text().splitlines()[0], report.read_text()[:500]
            assert harness.returncode == 3
        print(f"{command} {signal.Signals(sig).name}: exit {harness.returncode}, ended {took:.2f} s after the "
              f"second signal, teardown {record['server']['teardown']}")
    finally:
        if harness.poll() is None:
            harness.kill()
        for proc in _run_processes(out):
            proc.kill()
