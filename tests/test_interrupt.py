"""The kill matrix: SIGKILL, SIGINT and SIGTERM of the harness during start-up and during the workload.

Whatever the signal, no process of the run survives and no artifact holds the planted secrets; on SIGINT
and SIGTERM the run also ends with a record (outcome ``interrupted``) and ``compare`` with a partial report.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from harness.server.reaper import TAG_VAR

REPO = Path(__file__).resolve().parent.parent
LONG = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"
API_KEY = "sk-planted0123456789abcdefXYZ"
TOKEN = "planted-token-value-7f3a9c"

pytestmark = pytest.mark.slow


def _scenario(tmp_path: Path) -> Path:
    data = yaml.safe_load(LONG.read_text())
    data["workload"].update(requests=400, max_new_tokens=64)
    data["server"]["args"]["api-key"] = API_KEY
    data["server"]["env"] = {"MY_SERVICE_TOKEN": TOKEN}
    path = tmp_path / "secret.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _run_processes(out: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            tag = proc.environ().get(TAG_VAR, "")
        except (psutil.Error, OSError):
            continue
        if tag and any(tag.startswith(d.name) for d in [*out.glob("**/runs/*"), *out.glob("**/servers/*")]):
            found.append(proc)
    return found


def _logs(out: Path) -> list[Path]:
    return [*out.glob("**/runs/*/server.log"), *out.glob("**/servers/*/server.log")]


def _wait_for(out: Path, ready: bool, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        texts = [p.read_text(errors="replace") for p in _logs(out)]
        if texts and any(t.strip() for t in texts) and (not ready or any("ready to roll" in t for t in texts)):
            return
        time.sleep(0.05)
    pytest.fail(f"no {'ready' if ready else 'started'} server under {out}")


@pytest.mark.parametrize("command", ["run", "compare"])
@pytest.mark.parametrize("phase", ["start-up", "workload"])
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM], ids=["KILL", "INT", "TERM"])
def test_a_signal_leaves_no_process_and_no_secret(tmp_path: Path, command: str, phase: str, sig: int) -> None:
    if command == "compare" and sig == signal.SIGKILL and phase == "start-up":
        pytest.skip("covered by run: compare adds nothing to a killed start-up")
    out = tmp_path / "out"
    build = ["--build", "sim:post-fix"] if command == "run" else ["--reference"]
    argv = [sys.executable, "-m", "harness", command, str(_scenario(tmp_path)), "--case", "tokens=276,path=graph",
            *build, "--out", str(out)]
    harness = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(out, ready=phase == "workload")
        if phase == "workload":
            time.sleep(1.0)
        assert _run_processes(out), "the server should be running now"
        harness.send_signal(sig)
        stdout, stderr = harness.communicate(timeout=60)
        deadline = time.monotonic() + 10
        while _run_processes(out) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _run_processes(out), "processes of the run survived the harness"
        for path in out.rglob("*"):
            if path.is_file():
                text = path.read_text(errors="replace")
                assert API_KEY not in text and TOKEN not in text, f"secret in {path}"
        if sig == signal.SIGKILL:
            return
        assert harness.returncode == 3, stdout + stderr
        assert "Traceback" not in stderr
        [result] = list(out.glob("**/runs/*/result.json"))
        record = json.loads(result.read_text())
        assert record["outcome"] == "interrupted" and record["server"]["teardown"] is not None
        if command == "compare":
            report = json.loads(next(out.glob("compare/*/report.json")).read_text())
            assert report["partial"].startswith("interrupted during tokens=276,path=graph")
            assert "PARTIAL" in stdout
    finally:
        if harness.poll() is None:
            harness.kill()
        for proc in _run_processes(out):
            proc.kill()
