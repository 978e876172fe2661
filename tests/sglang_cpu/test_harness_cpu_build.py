"""The harness's side of the real-SGLang CPU build, without starting a server: the label, the `cpu:` section of a
scenario, ``--cpu``'s specs, and what the CPU launcher refuses before anything starts (issues 50, 51)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.build import Build
from harness.build.labels import CPU_BUILD_LABEL, REFERENCE_SERVER_LABEL, build_label, cpu_build_of, runs_on_cpu
from harness.build.sglang_cpu import LABEL
from harness.build.tiny_model_cache import TINY_PREFIX, tiny_model_path
from harness.compare.verdicts import RoleResult
from harness.launch.cpu_launcher import NOT_ON_CPU, CpuLauncher
from harness.launch.launcher import SGLangLauncher, launcher_for
from harness.records.outcome import Outcome
from harness.scenario import load_file
from harness.util.errors import UserError
from tests.helpers import REPO

# Subprocesses (validate, triage, a test server), never a real SGLang server: any worker may run them.
pytestmark = pytest.mark.slow

SEED = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"
GRAPH_29021 = REPO / "scenarios" / "frozen_kv_mtp" / "trtllm_swa_nvfp4_graph_draft.yaml"
CPU_SPEC = "pip:sglang==0.5.14,deps=cpu"


def _build(spec: str = CPU_SPEC) -> Build:
    # Only the launcher's choices are exercised here: no interpreter is ever started from this build.
    return Build("pip", spec, sys.executable, (sys.executable, "-m", "sglang.launch_server"),
                 label=build_label(spec))


def test_the_label_is_one_text_the_build_package_and_every_reader_share() -> None:
    assert CPU_BUILD_LABEL == LABEL == "real SGLang, plain-torch kernels on CPU"
    assert build_label("pip:sglang==0.5.15,deps=cpu") == CPU_BUILD_LABEL
    assert build_label("sim:pre-fix") == build_label("simsrc:/x") == REFERENCE_SERVER_LABEL
    assert build_label("pip:sglang==0.5.15") is None and build_label("pip:sglang==0.5.15,deps=none") is None
    assert runs_on_cpu("pip:sglang==0.5.15,deps=cpu") and not runs_on_cpu("python:/usr/bin/python3")


def test_cpu_runs_a_roles_release_on_its_cpu_build_and_refuses_what_is_no_release() -> None:
    assert cpu_build_of("pip:sglang==0.5.14") == "pip:sglang==0.5.14,deps=cpu"
    assert cpu_build_of("pip:sglang==0.5.14,deps=full") == "pip:sglang==0.5.14,deps=cpu"
    for spec in ("sim:pre-fix", "src:/checkout", "python:/usr/bin/python3"):
        with pytest.raises(UserError, match="is not a release"):
            cpu_build_of(spec)


def test_a_report_row_of_the_cpu_build_carries_its_label() -> None:
    role = RoleResult(role="before", build=CPU_SPEC, build_kind="pip", version="0.5.14", outcomes=(Outcome.CRASH,),
                      label=CPU_BUILD_LABEL)
    assert role.runs_on_cpu and role.build_label == f"{CPU_SPEC} — {CPU_BUILD_LABEL}"
    assert RoleResult.from_dict(role.to_dict()).build_label == role.build_label
    gpu = RoleResult(role="before", build="pip:sglang==0.5.14", build_kind="pip", version="0.5.14",
                     outcomes=(Outcome.CRASH,))
    assert not gpu.runs_on_cpu and gpu.build_label == "pip:sglang==0.5.14"


def test_the_seed_scenario_states_how_it_runs_on_the_cpu_build() -> None:
    cases = {c.name: c for c in load_file(SEED).cases}
    eager = cases["tokens=276,path=eager"]
    on_cpu = eager.for_cpu().scenario
    assert on_cpu.server.model == "tiny:gemma4" and on_cpu.server.draft_model == "tiny:gemma4-assistant"
    args = on_cpu.server.args
    assert args["device"] == "cpu" and args["attention-backend"] == "triton" and args["disable-overlap-schedule"]
    assert "tp-size" not in args and "enable-hierarchical-cache" not in args
    # The case's own flags (the eager path) and the GPU run's expectations are the file's.
    assert args["speculative-num-steps"] == 1 and args["disable-cuda-graph"] is True
    assert on_cpu.expect["before"].signatures == ("frozen-kv-mtp-stale-out-cache-loc",)
    assert eager.scenario.server.model == "google/gemma-4-31B-it"  # the GPU run is untouched
    assert eager.cpu_unsupported is None
    assert "CUDA graph" in (cases["tokens=276,path=graph"].cpu_unsupported or "")
    [graph_29021] = load_file(GRAPH_29021).cases
    assert "trtllm_mha" in (graph_29021.cpu_unsupported or "")


def test_the_cpu_launcher_runs_the_cpu_case_on_no_gpu_with_the_tiny_models_in_the_cache() -> None:
    build = _build()
    launcher = launcher_for(build)
    assert isinstance(launcher, CpuLauncher) and launcher.label == CPU_BUILD_LABEL
    assert isinstance(launcher_for(_build("pip:sglang==0.5.14")), SGLangLauncher)
    eager = next(c for c in load_file(SEED).cases if c.name == "tokens=276,path=eager")
    case = launcher.case_for(eager)
    sc = case.scenario
    assert sc.server.model == str(tiny_model_path(TINY_PREFIX + "gemma4"))
    assert sc.server.draft_model == str(tiny_model_path(TINY_PREFIX + "gemma4-assistant"))
    # The seed's 4 x L40S describe the GPU run: nothing is leased or asked of NVML on the CPU build.
    assert sc.hardware.gpus == 0 and launcher.gpus_needed(case) == 0


def test_the_cpu_launcher_refuses_a_gpu_only_case_and_a_scenario_that_never_says_how_it_runs_on_cpu() -> None:
    launcher = CpuLauncher(_build())
    graph = next(c for c in load_file(SEED).cases if c.name == "tokens=276,path=graph")
    said = launcher.missing(launcher.case_for(graph))
    assert said is not None and NOT_ON_CPU in said and "CUDA graph" in said
    [nvfp4] = load_file(GRAPH_29021).cases
    said = launcher.missing(launcher.case_for(nvfp4))
    assert said is not None and "trtllm_mha" in said
    accept = REPO / "scenarios" / "frozen_kv_mtp" / "accept_length_guard.yaml"
    case = load_file(accept).cases[0]
    said = launcher.missing(launcher.case_for(case))
    assert said is not None and "cpu:" in said and "--device" in said


def test_a_cpu_override_outside_what_the_cpu_build_may_change_is_one_line_naming_file_and_field(tmp_path: Path) -> None:
    data = yaml.safe_load(SEED.read_text())
    data["cpu"]["overrides"]["builds.before.spec"] = "pip:sglang==0.5.13"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data, sort_keys=False))
    done = subprocess.run([sys.executable, "-m", "harness", "validate", str(bad)], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    [line] = [x for x in done.stderr.splitlines() if x.strip()] or [done.stdout]
    assert line.startswith(f"{bad}:") and "cpu.overrides.builds.before.spec" in line and "server.*" in line


def test_compare_cpu_with_reference_is_refused_before_anything_runs() -> None:
    done = subprocess.run([sys.executable, "-m", "harness", "compare", str(SEED), "--cpu", "--reference"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "choose one" in done.stderr


@pytest.mark.parametrize(("fixture", "site"), [("sglang-0.5.14-real-server-cpu.log", 463),
                                                ("sglang-0.5.14-real-fill_from-meta.log", 461)],
                         ids=["cpu-branch-real-server", "gpu-branch-real-code"])
def test_the_cpu_and_the_gpu_branch_of_fill_from_both_confirm_the_catalogue_entry_fitted_to_0_5_14(
        fixture: str, site: int) -> None:
    log = REPO / "fixtures" / "tracebacks" / fixture
    assert f'cuda_graph_buffer_registry.py", line {site}, in fill_from' in log.read_text()
    done = subprocess.run([sys.executable, "-m", "harness", "triage", str(log)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    first, *rest = done.stdout.splitlines()
    assert first.startswith(f"{log}: frozen-kv-mtp-stale-out-cache-loc (bug)") and "[confirmed]" in first
    [fixed] = [line for line in rest if line.strip().startswith("fixed:")]
    assert "fixed in 0.5.15" in fixed and "fit only 0.5.14" in fixed


_READY_BEFORE_BIND = """
import socket, sys, time
print("The server is fired up and ready to roll!", flush=True)  # as SGLang with --skip-server-warmup: line first
time.sleep(1.0)
sock = socket.socket(); sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind(("127.0.0.1", int(sys.argv[1]))); sock.listen()
print("Uvicorn running", flush=True)
time.sleep(60)
"""


def test_the_workload_waits_for_the_socket_sglang_binds_after_its_ready_line(tmp_path: Path) -> None:
    import time

    from harness.server.lease import port_is_free
    from harness.server.process import ServerProcess
    from tests.helpers import free_port

    port = free_port()
    script = tmp_path / "ready_before_bind.py"
    script.write_text(_READY_BEFORE_BIND)
    server = ServerProcess([sys.executable, str(script), str(port)], env=dict(os.environ),
                           host="127.0.0.1", port=port, log_path=tmp_path / "server.log", run_tag="h9-bind-test",
                           startup_timeout_s=30, health_paths=())
    with server:
        server.wait_ready()
        assert server.ready_via == "log" and port_is_free("127.0.0.1", port)  # ready, and nothing listens yet
        began = time.monotonic()
        assert server.wait_listening(30.0)
        assert time.monotonic() - began > 0.3 and not port_is_free("127.0.0.1", port)


def test_a_real_sglang_run_never_gets_a_port_whose_grpc_twin_passes_65535() -> None:
    from harness.server.lease import SGLANG_HIGHEST_PORT, lease_port

    assert SGLANG_HIGHEST_PORT + 10000 == 65535
    leases = [lease_port(highest=SGLANG_HIGHEST_PORT) for _ in range(30)]
    try:
        assert all(lease.port <= SGLANG_HIGHEST_PORT for lease in leases)
    finally:
        for lease in leases:
            lease.release()


def test_a_disagreement_between_the_rules_and_a_real_release_names_the_rule() -> None:
    from tests.sglang_cpu.test_seed_cpu_live import MODEL_EAGER_LINE, REAL_FRAMES, _disagreements

    real = {"outcome": "crash", "signature": "frozen-kv-mtp-stale-out-cache-loc", "phase": "workload",
            "build": {"profile": {"eager_max_steps": 1, "swa_refill": "unguarded"}}}
    real_log = "\n".join(f'  File "/venv/sglang/srt/{frame}' for frame in REAL_FRAMES)
    agreeing = {"outcome": "crash", "signature": "frozen-kv-mtp-stale-out-cache-loc", "phase": "workload"}
    assert _disagreements("0.5.14", real, real_log, agreeing, MODEL_EAGER_LINE) == []
    passing = {"outcome": "pass", "signature": None, "phase": "workload"}
    said = _disagreements("0.5.14", real, real_log, passing, "Capture draft cuda graph end (modelled)")
    assert len(said) == 3  # outcome, signature, draft path
    assert all("harness/sim/release_rules.py RULES row since 0.5.13" in line for line in said)
    assert said[0].startswith("outcome: real 0.5.14 'crash'") and said[2].startswith("draft path: real 0.5.14 eager")
    wrong_wheel = {**real, "build": {"profile": {"eager_max_steps": 0, "swa_refill": "unguarded"}}}
    [line] = _disagreements("0.5.14", wrong_wheel, real_log, agreeing, MODEL_EAGER_LINE)
    assert line.startswith("eager_max_steps: real 0.5.14's wheel says 0")


def test_the_cpu_case_carries_its_overrides_applied_once_so_a_written_back_case_keeps_what_a_search_removed() -> None:
    launcher = CpuLauncher(_build())
    cases = {c.name: c for c in load_file(SEED).cases}
    case = launcher.case_for(cases["tokens=276,path=eager"])
    assert case.scenario.cpu is not None and case.scenario.cpu.overrides == {}
    assert launcher.case_for(case).scenario.server.args == case.scenario.server.args  # applying it again is a no-op
    graph = launcher.case_for(cases["tokens=276,path=graph"])
    assert graph.scenario.cpu is not None and "CUDA graph" in (graph.scenario.cpu.unsupported or "")
