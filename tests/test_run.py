"""`sglang-repro run` end to end on the CPU reference server: verdicts, artifacts, no orphans."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from harness.build import Build
from harness.pipeline import RunOptions, execute_run
from harness.records.outcome import Outcome, Phase
from harness.records.run_record import ExpectationResult, RunRecord, read_record
from harness.scenario import load_file, select_cases
from harness.server.reaper import TAG_VAR

REPO = Path(__file__).resolve().parent.parent
LONG = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"
NVFP4 = REPO / "scenarios" / "frozen_kv_mtp" / "trtllm_swa_nvfp4_graph_draft.yaml"

pytestmark = pytest.mark.slow


def tagged_processes(prefix: str) -> list[int]:
    """PIDs of live processes whose harness run tag starts with ``prefix`` (other tests run in parallel)."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get(TAG_VAR, "").startswith(prefix):
                found.append(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def case_of(path: Path, name: str):
    (case,) = select_cases(load_file(path), name)
    return case


def result_of(stdout: str) -> RunRecord:
    run_dir = stdout.strip().splitlines()[-1].split("-> ")[-1]
    return read_record(Path(run_dir))


def test_pre_fix_eager_crashes_with_the_signature(run_cli, tmp_path):
    res = run_cli("run", LONG, "--case", "tokens=276,path=eager", "--build", "sim:pre-fix", "--out", tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    result = result_of(res.stdout)
    assert result.outcome is Outcome.CRASH
    assert result.signature == "frozen-kv-mtp-stale-out-cache-loc"
    assert "[276]" in result.reason and result.phase is Phase.WORKLOAD
    run_dir = Path(result.artifacts)
    for name in ("result.json", "server.log", "requests.jsonl", "env.json", "repro.sh"):
        assert (run_dir / name).is_file(), name
    assert "broadcast shape [276]" in (run_dir / "server.log").read_text()
    assert json.loads((run_dir / "first_failing_request.json").read_text())["input_ids"].__len__() == 276
    assert "--disable-cuda-graph" in (run_dir / "repro.sh").read_text()
    assert not tagged_processes(result.server.run_tag)


def test_post_fix_passes_with_ground_truth_metrics(tmp_path):
    case = case_of(LONG, "tokens=276,path=eager")
    result = execute_run(case, "sim:post-fix", role="after", options=RunOptions(out_root=tmp_path, progress=False))
    assert result.outcome == "pass", result.reason
    assert result.expectation == ExpectationResult(role="after", expected="pass", held=True)
    truth = result.ground_truth
    assert truth is not None
    m = result.metrics
    # The harness measures acceptance from each response; the server counts it in verification.
    assert m["accept_length"] == pytest.approx(truth["accept_length"], rel=1e-9)
    # The server's own figure is folded every 40 decode batches after the flush before the trial: the
    # reporter's, when there was a fold (absent before, as in SGLang).
    if truth["server_accept_length"] is None:
        assert m["accept_length_server"] is None
    else:
        assert m["accept_length_server"] == pytest.approx(truth["server_accept_length"], rel=1e-9)
    assert m["completion_tokens"] == truth["completion_tokens"]
    # Client throughput over its wall time vs the server's, from first arrival to last finish.
    assert m["output_throughput_tok_s"] == pytest.approx(truth["span_throughput"], rel=0.02)
    accept = m["accept_length"]
    assert accept is not None and accept > 1.0
    assert not tagged_processes(result.server.run_tag)


@pytest.mark.parametrize("log_level", [None, "warning"])
def test_graph_draft_crash_at_warm_up_is_a_crash_with_a_reason(tmp_path, log_level):
    case = case_of(NVFP4, "default")
    if log_level is not None:  # no INFO lines: no "Uvicorn running", the phase rests on other evidence
        data = case.scenario.model_dump()
        data["server"]["args"]["log-level"] = log_level
        case = type(case)(file=case.file, name=case.name, values=case.values,
                          scenario=type(case.scenario).model_validate(data))
    result = execute_run(case, "sim:pre-fix", role="before", options=RunOptions(out_root=tmp_path, progress=False))
    assert result.outcome == "crash"
    assert result.signature == "frozen-kv-mtp-stale-out-cache-loc-graph"
    assert result.reason.startswith("warm-up:") and result.phase is Phase.WARMUP
    if log_level is not None:
        log = Path(result.server.log).read_text(encoding="utf-8")
        assert "Uvicorn running" not in log and "SIGQUIT received" in log
    assert result.expectation is not None and result.expectation.held
    assert not tagged_processes(result.server.run_tag)


def test_hung_server_times_out_and_leaves_nothing(tmp_path):
    hung = REPO / "tests" / "servers" / "hung.py"
    case = case_of(LONG, "tokens=271,path=graph")
    data = case.scenario.model_dump()
    data["timeouts"] = {"startup_s": 3, "request_s": 2, "scenario_s": 20}
    scenario = type(case.scenario).model_validate(data)
    case = type(case)(file=case.file, name=case.name, values=case.values, scenario=scenario)
    # A peer that accepts TCP connections and never answers, launched through the reference-server
    # build kind so its pre-flight uses the model's parser; the harness's lifecycle is what is tested.
    build = Build(kind="sim", spec="sim:hung", python=sys.executable,
                  launcher=(sys.executable, str(hung)), is_reference=True, version="hung")
    started = time.monotonic()
    result = execute_run(case, build, options=RunOptions(out_root=tmp_path, progress=False))
    assert result.outcome == "timeout", result.reason
    assert "not ready after 3 s" in result.reason
    assert time.monotonic() - started < 15
    assert not tagged_processes(result.server.run_tag)


def test_sigkill_of_the_harness_leaves_no_server(tmp_path):
    scenario = yaml.safe_load(LONG.read_text())
    scenario["workload"].update(requests=200, max_new_tokens=64)
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(scenario))
    out = tmp_path / "out"
    harness = subprocess.Popen(
        [sys.executable, "-m", "harness", "run", str(path), "--case", "tokens=271,path=graph",
         "--build", "sim:post-fix", "--out", str(out), "--no-progress"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            # A server shared between trials logs under servers/<tag>/ until its trial's record is written.
            logs = list(out.glob("runs/*/server.log")) + list(out.glob("servers/*/server.log"))
            if logs and "ready to roll" in logs[0].read_text():
                break
            time.sleep(0.2)
        else:
            pytest.fail("server never became ready")
        prefix = logs[0].parent.name
        time.sleep(1.0)  # mid-workload
        assert tagged_processes(prefix), "the server should be running now"
        harness.send_signal(signal.SIGKILL)
        harness.wait(10)
        killed_at = time.monotonic()
        while tagged_processes(prefix) and time.monotonic() - killed_at < 5:
            time.sleep(0.1)
        assert not tagged_processes(prefix), "server processes survived the harness"
    finally:
        if harness.poll() is None:
            harness.kill()
        for run_dir in [*out.glob("runs/*"), *out.glob("servers/*")]:
            for pid in tagged_processes(run_dir.name):
                os.kill(pid, signal.SIGKILL)


def test_bad_build_spec_is_usage_error(run_cli):
    res = run_cli("run", LONG, "--build", "nope:1")
    assert res.returncode == 2
    assert "valid build specs" in res.stderr


def _real_python() -> str:
    from harness.build import resolve_build

    return resolve_build("pip:sglang==0.5.15,deps=none").python


def test_real_sglang_rejects_unknown_flag_before_launch(tmp_path, run_cli):
    data = yaml.safe_load(LONG.read_text())
    data["server"]["args"]["definitely-not-a-flag"] = 1
    path = tmp_path / "bogus.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    res = run_cli("run", path, "--case", "tokens=276,path=eager", "--build", f"python:{_real_python()}",
                  "--out", tmp_path / "out", timeout=300)
    assert res.returncode == 3, res.stdout + res.stderr
    result = result_of(res.stdout)
    assert result.outcome is Outcome.INFRA and result.phase is Phase.PREFLIGHT
    assert "unrecognized arguments: --definitely-not-a-flag" in result.reason
    assert result.build.version == "0.5.15"
    assert not Path(result.server.log).exists(), "nothing may be launched"
    assert result.server.exit_code is None


def test_real_sglang_without_the_model_is_infra(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    case = case_of(LONG, "tokens=276,path=eager")
    result = execute_run(case, f"python:{_real_python()}", role="after",
                         options=RunOptions(out_root=tmp_path, progress=False))
    assert result.outcome == "infra"
    assert "google/gemma-4-31B-it is not in" in result.reason
    assert result.expectation is not None and not result.expectation.held
    assert not Path(result.server.log).exists()


def test_full_pip_build_is_not_installed_without_the_hardware(tmp_path, monkeypatch):
    monkeypatch.setenv("SGLANG_REPRO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SGLANG_REPRO_GPU_INVENTORY", "")  # no GPUs, whatever this host has
    case = case_of(LONG, "tokens=276,path=eager")
    result = execute_run(case, "pip:sglang==0.5.15", role="after", options=RunOptions(out_root=tmp_path))
    assert result.outcome == "infra"
    assert "needs 4 GPUs matching L40S" in result.reason and "was not created" in result.reason
    assert not (tmp_path / "cache").exists()
    assert result.build.spec == "pip:sglang==0.5.15" and result.build.version is None


def test_phase_before_ready_does_not_rest_on_info_lines():
    from harness.contract import facts as contract
    from harness.pipeline.judge import before_ready_phase

    sigquit = f"[t] SIGQUIT received. signum=None, frame=None. {contract.CHILD_FAILED_RUNNING_LINE}"
    assert before_ready_phase("", []) is Phase.STARTUP  # no port, no request: start-up
    assert before_ready_phase("", [], http_answered=True) is Phase.WARMUP  # /health answered 503
    assert before_ready_phase(sigquit, []) is Phase.WARMUP  # the tokenizer manager had taken a request
    assert before_ready_phase(f"[t] {contract.CHILD_FAILED_LINE}", []) is Phase.STARTUP  # launch phase
    assert before_ready_phase(sigquit, [contract.SKIP_SERVER_WARMUP_FLAG], http_answered=True) is Phase.STARTUP
