"""Each benchmark script runs end to end at a tiny size and prints a JSON summary whose figures add up.

Real processes: the scripts start CPU reference servers and real clients; nothing is mocked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
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
    assert trial["verdict_at"] > trial["crash_written_at"] > trial["crash_written_after"]
    assert harness["write_bracket_ms"]["n"] == 1
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

def test_startup_benchmark_sets_each_command_and_the_server_beside_its_peer(tmp_path: Path) -> None:
    result = _run("bench_startup.py", "--rounds", "1", "--server-rounds", "1", "--baseline", str(REPO),
                  tmp_path=tmp_path)
    assert result["baseline"]["checkout"] == str(REPO)
    cli, server = result["this"]["cli_wall"], result["this"]["reference_server_wall"]
    assert result["this"]["reference_server_cpu"]["start_to_ready_ms"]["p50"] > 0
    assert set(cli["commands_ms"]) == {"--help", "validate", "list", "triage", "schema"}
    for name, row in cli["commands_ms"].items():
        assert row["n"] == 1 and row["p50"] > 0
        assert cli["ratio_over_peer_p50"][name] == pytest.approx(row["p50"] / cli["peer_ms"]["p50"], rel=1e-2)
    assert server["start_to_ready_ms"]["n"] == 1 and server["bare_torch_import_ms"]["n"] == 1
    assert server["ratio_server_over_torch_p50"] == pytest.approx(
        server["start_to_ready_ms"]["p50"] / server["bare_torch_import_ms"]["p50"], rel=1e-2)
    assert (tmp_path / "work" / "server-this-0.log").read_text().count("ready to roll") == 1
    assert (tmp_path / "work" / "server-baseline-0.log").read_text().count("ready to roll") == 1


def _prepared(spec: str) -> bool:
    from harness.build import parse_build_spec, pip_env_ready

    return pip_env_ready(parse_build_spec(spec))


@pytest.mark.skipif(not _prepared("pip:sglang==0.5.15,deps=none"), reason="sglang 0.5.15 no-deps env not prepared")
def test_preflight_benchmark_times_a_real_parser_cold_and_cached(tmp_path: Path) -> None:
    result = _run_plain("bench_preflight.py", "--rounds", "1", tmp_path=tmp_path)
    assert result["available"] is True and result["sglang"] == "0.5.15"
    cold, cached = result["flag_check_ms"]["cold"]["p50"], result["flag_check_ms"]["cached"]["p50"]
    assert cached < cold  # the cached check starts no parser
    assert result["ratio_cold_over_cached_p50"]["flag_check"] == pytest.approx(cold / cached, rel=1e-2)
    assert result["batch_ms"]["then_every_case_run"]["p50"] < result["batch_ms"]["cold_all_cases"]["p50"]


def test_preflight_benchmark_says_when_the_build_is_not_prepared(tmp_path: Path) -> None:
    result = _run_plain("bench_preflight.py", "--spec", "pip:sglang==0.0.1,deps=none", tmp_path=tmp_path)
    assert result == {"spec": "pip:sglang==0.0.1,deps=none", "available": False,
                      "why": "pip:sglang==0.0.1,deps=none is not prepared (sglang-repro prepare)"}


def _run_plain(script: str, *args: str, tmp_path: Path) -> dict[str, Any]:
    # The pre-flight benchmark has no server: no "server" label to check.
    out = tmp_path / "summary.json"
    proc = subprocess.run([sys.executable, str(BENCH / script), "--out", str(out), *args], check=False,
                          cwd=REPO, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, f"{script} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    printed = json.loads(proc.stdout)
    assert json.loads(out.read_text()) == printed
    return printed


def test_make_test_benchmark_counts_the_cpu_its_processes_burn(monkeypatch: pytest.MonkeyPatch) -> None:
    # bench_make_test's rounds take minutes; its CPU reading is checked on children that burn a known second
    # each, one per core, so that busy and idle time cannot pass for each other.
    monkeypatch.syspath_prepend(str(BENCH))
    from bench_make_test import cpu_over, machine_cpu_s

    cores = os.cpu_count() or 1
    before, began = machine_cpu_s(), time.monotonic()
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0:\n    pass"
    children = [subprocess.Popen([sys.executable, "-c", burn]) for _ in range(cores)]
    assert all(child.wait(timeout=120) == 0 for child in children)
    cpu = cpu_over(before, machine_cpu_s(), cores)
    wall = time.monotonic() - began
    # The children's seconds and whatever else ran; /proc/stat samples at the clock tick, hence the 0.9.
    assert 0.9 * cores <= cpu["busy_s"] <= wall * cores + 0.5, (cpu, wall)
    assert cpu["busy_share"] > 0.5 and cpu["floor_s"] == pytest.approx(cpu["busy_s"] / cores, abs=0.1)
