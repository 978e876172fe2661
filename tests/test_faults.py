"""Faults that must end in the right verdict, quickly: a hung server's requests, a port another process holds."""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path

import pytest
import yaml

from harness.server.process import ServerDied, ServerProcess

REPO = Path(__file__).resolve().parent.parent
LONG = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"

pytestmark = pytest.mark.slow


def test_requests_to_a_hung_server_are_a_timeout_within_their_bound(run_cli, tmp_path: Path) -> None:
    # The repro: every step of the model takes a minute (the most a build spec allows), each request
    # is bounded at 3 s.
    data = yaml.safe_load(LONG.read_text())
    data["timeouts"]["request_s"] = 3
    data["workload"]["requests"] = 2
    path = tmp_path / "hung.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    started = time.monotonic()
    res = run_cli("run", path, "--case", "tokens=276,path=graph", "--build", "sim:post-fix,step-cost-ms=60000",
                  "--out", tmp_path / "out", timeout=300)
    elapsed, ended_wall = time.monotonic() - started, time.time()
    assert res.returncode == 3, res.stdout + res.stderr
    [result] = list((tmp_path / "out").glob("runs/*/result.json"))
    record = json.loads(result.read_text())
    assert (record["outcome"], record["phase"]) == ("timeout", "workload")
    assert "hit the 3 s bound" in record["reason"]
    timings = record["timings"]
    lines = [json.loads(line) for line in (result.parent / "requests.jsonl").read_text().splitlines()]
    [header] = [line for line in lines if line["kind"] == "workload"]
    [client] = [line for line in lines if line["kind"] == "client"]
    # The two requests, one after the other, each ended at its bound.
    assert (client["measured_end_ns"] - client["measured_start_ns"]) / 1e9 < 3 * 2 + 1, client
    # Nothing more is asked of a hung server after its requests timed out (no /server_info or /metrics, each of
    # which would wait out its 5 s bound): from the last request's end, only teardown and the record. Measured
    # from the requests' own clock, so the wait for the socket before them (seconds on a loaded machine) is not
    # counted against it.
    after_requests_s = ended_wall - (header["epoch_wall"] + client["measured_end_ns"] / 1e9)
    assert after_requests_s - timings["teardown"] - timings["record"] < 5, (after_requests_s, timings)
    assert elapsed < timings.get("start", 0) + timings["workload"] + 30


def test_a_port_held_by_another_process_is_not_waited_for(tmp_path: Path) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        argv = [sys.executable, "-m", "harness.sim.server", "--model-path", "google/gemma-4-31B-it", "--host", "127.0.0.1",
                "--port", str(port), "--skip-server-warmup"]
        server = ServerProcess(argv, env={"PYTHONUNBUFFERED": "1", "PATH": "/usr/bin:/bin"}, host="127.0.0.1",
                               port=port, log_path=tmp_path / "server.log", run_tag=f"port-test-{port}",
                               startup_timeout_s=120)
        server.start()
        with pytest.raises(ServerDied):
            server.wait_ready()
        report = server.stop()
        assert report.port_freed is False  # still held, by the test: not the run's to wait for
        assert report.duration_s < 10, report
        assert "address already in use" in (tmp_path / "server.log").read_text().lower()
    finally:
        holder.close()
