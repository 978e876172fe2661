"""Each benchmark script runs end to end at a tiny size and prints a JSON summary whose figures add up.

Real processes: the scripts start CPU reference servers and real clients; nothing is mocked.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "benchmarks"
NODEPS_PYTHON = Path.home() / ".cache/sglang-repro/envs/sglang-0.5.15-nodeps-torch2.13.0-py311/bin/python"

pytestmark = pytest.mark.slow


def _run(script: str, *args: str, tmp_path: Path, timeout: float = 240) -> dict[str, Any]:
    out = tmp_path / "summary.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), "--work", str(tmp_path / "work"), "--out", str(out), *args],
        cwd=REPO, capture_output=True, text=True, timeout=timeout,
    )
    assert proc.returncode == 0, f"{script} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    printed = json.loads(proc.stdout)
    assert json.loads(out.read_text()) == printed  # --out holds what was printed
    assert "not SGLang" in printed["server"]  # the reference server is labelled as a model
    return printed


def test_crash_verdict_benchmark_names_the_crash_only_on_the_harness_side(tmp_path: Path) -> None:
    result = _run("bench_crash_verdict.py", "--runs", "1", "--habit-runs", "1", "--request-timeout-s", "20",
                  tmp_path=tmp_path)
    harness, habit = result["harness"], result["habit"]
    assert harness["runs"] == 1 and habit["runs"] == 1
    assert harness["crash_to_verdict_ms"]["n"] == 1, result["trials"]
    assert habit["crash_to_verdict_ms"]["n"] == 1, result["trials"]
    assert harness["signature_identified"] == "yes"
    assert harness["signatures"] == ["frozen-kv-mtp-stale-out-cache-loc"]
    assert habit["signature_identified"] == "no"
    # Latencies are measured from the crash line, so they are positive and well under the bounds.
    for side in (harness, habit):
        assert 0 < side["crash_to_verdict_ms"]["p50"] < 20_000
    trial = next(t for t in result["trials"] if t["side"] == "harness")
    assert trial["verdict_at"] > trial["crash_written_at"]
    assert result["ratio_habit_over_harness"]["p50"] == pytest.approx(
        habit["crash_to_verdict_ms"]["p50"] / harness["crash_to_verdict_ms"]["p50"], rel=1e-2)


@pytest.mark.skipif(not NODEPS_PYTHON.exists(), reason="the sglang 0.5.15 no-deps environment is not prepared")
def test_workload_client_benchmark_compares_both_clients(tmp_path: Path) -> None:
    result = _run("bench_workload_client.py", "--rounds", "1", "--num-prompts", "2", "--input-len", "16",
                  "--output-len", "4", "--concurrency", "2", "--sglang-python", str(NODEPS_PYTHON),
                  tmp_path=tmp_path)
    assert [r["side"] for r in result["runs"]] == ["harness", "bench_serving"]
    for row in result["runs"]:
        assert row["requests_ok"] == 2
        assert row["output_throughput_tok_s"] > 0
        assert 0 < row["work_cpu_s"] < row["process_cpu_s"]
    h, bs = result["harness"], result["bench_serving"]
    assert result["ratio_harness_over_bench_serving"]["output_throughput"] == pytest.approx(
        h["output_throughput_tok_s"]["mean"] / bs["output_throughput_tok_s"]["mean"], rel=1e-2)


def test_workload_client_benchmark_says_when_bench_serving_is_missing(tmp_path: Path) -> None:
    result = _run("bench_workload_client.py", "--rounds", "1", "--num-prompts", "1", "--input-len", "8",
                  "--output-len", "2", "--sglang-python", str(tmp_path / "no-such-python"), tmp_path=tmp_path)
    assert result["bench_serving"]["available"] is False
    assert "no-such-python" in result["bench_serving"]["why"]
    assert "ratio_harness_over_bench_serving" not in result
    assert [r["side"] for r in result["runs"]] == ["harness"]
    assert result["harness"]["output_throughput_tok_s"]["mean"] > 0


def test_client_ceiling_benchmark_sweeps_rates_against_the_no_op_server(tmp_path: Path) -> None:
    out = tmp_path / "summary.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH / "bench_client_ceiling.py"), "--work", str(tmp_path / "work"), "--out", str(out),
         "--rates", "20,40", "--seconds", "1", "--closed-requests", "30", "--closed-concurrency", "4",
         "--no-bench-serving"], cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result == json.loads(out.read_text()) and "not SGLang" in result["server"]
    assert [r["requested_rate_rps"] for r in result["sweep"]] == [20, 40]
    for row in result["sweep"]:
        h = row["harness"]
        assert h["requests_ok"] == row["requests"] == 50 and h["sched_delay_ms_p99"] >= h["sched_delay_ms_p50"] >= 0
        assert h["output_throughput_tok_s"] == pytest.approx(16 * h["request_throughput_rps"], rel=1e-2)
    closed = result["closed_loop"]["harness"]
    assert closed["requests_ok"] == 30 and closed["concurrency_max"] == 4
    assert result["bench_serving"] == {"available": False, "why": "--no-bench-serving given"}
