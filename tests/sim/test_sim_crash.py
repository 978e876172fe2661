"""The #28264 crash on both draft paths (eager; CUDA graph on trtllm_mha + SWA, #29021), through real server processes."""

from __future__ import annotations

import contextlib
import json
import random
import signal
import time

import psutil
import pytest

from harness.contract.facts import (
    CHILD_CRASHED_LINE,
    CHILD_FAILED_RUNNING_LINE,
    CHILD_FAILED_SELF_KILL,
    READY_LINE,
    UVICORN_RUNNING,
)
from harness.sim.model_config import resolve_model
from harness.sim.warmup import warmup_request
from harness.util.kill import signal_process
from tests.process_marks import alive, command_line
from tests.sim.sim_helpers import EAGER_28264, GRAPH_28264

pytestmark = pytest.mark.slow

FRAMES = ["draft_forward", "forward", "_forward_raw", "forward_decode", "_eager_fb_view", "fill_from",
          "_grouped_foreach_copy_"]


def _prompt(n: int, seed: int = 0) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(32000) for _ in range(n)]


def _wait_exit(server, timeout: float = 20.0) -> int:
    deadline = time.monotonic() + timeout
    while server.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    return server.poll()


def test_pre_fix_eager_dies_on_276_token_prompt_and_leaves_no_process(sim_server):
    server = sim_server([*EAGER_28264, "--sim-revision", "pre-fix", "--skip-server-warmup"])
    pids = server.tree_pids()
    assert len(pids) >= 2, "expected a front and a scheduler process"
    with contextlib.suppress(OSError):  # the connection dies with the server
        server.post("/generate", {"input_ids": _prompt(276), "sampling_params": {"max_new_tokens": 64, "temperature": 0}},
                    timeout=20)
    rc = _wait_exit(server)
    assert rc == CHILD_FAILED_SELF_KILL  # SGLang's SIGQUIT handler kills the tree, the launcher in it
    log = server.log_text()
    assert "RuntimeError: output with shape [1] doesn't match the broadcast shape [276]" in log
    assert "Scheduler hit an exception: Traceback (most recent call last):" in log
    assert CHILD_CRASHED_LINE not in log  # the scheduler SIGQUITs its parent itself: no watchdog line
    positions = [log.find(f"in {name}\n") for name in FRAMES]
    assert all(p >= 0 for p in positions), log
    assert positions == sorted(positions), "frames must appear innermost last"
    time.sleep(0.5)
    assert not [p for p in pids if alive(p)]


def test_pre_fix_eager_names_the_prompt_length(sim_server):
    length = 131  # in-process tests cover more lengths
    server = sim_server([*EAGER_28264, "--sim-revision", "pre-fix", "--skip-server-warmup"])
    with contextlib.suppress(OSError):
        server.post("/generate", {"input_ids": _prompt(length, length), "sampling_params": {"max_new_tokens": 8}},
                    timeout=20)
    assert _wait_exit(server) not in (None, 0)
    assert f"doesn't match the broadcast shape [{length}]" in server.log_text()


@pytest.mark.parametrize(("args", "revision"), [(EAGER_28264, "post-fix"), (GRAPH_28264, "pre-fix")])
def test_no_crash_post_fix_or_graph_path(sim_server, args, revision):
    server = sim_server([*args, "--sim-revision", revision])
    status, body = server.post("/generate", {"input_ids": _prompt(276), "sampling_params": {
        "max_new_tokens": 64, "temperature": 0, "ignore_eos": True}})
    assert status == 200, body
    meta = json.loads(body)["meta_info"]
    assert meta["prompt_tokens"] == 276 and meta["completion_tokens"] == 64
    assert meta["spec_accept_length"] > 1
    assert server.poll() is None
    assert "broadcast shape" not in server.log_text()


def test_pre_fix_eager_dies_on_sglangs_own_warmup_before_the_ready_line(sim_server):
    server = sim_server([*EAGER_28264, "--sim-revision", "pre-fix"], wait_ready=False)
    assert _wait_exit(server, 60) not in (None, 0)
    log = server.log_text()
    expected = len(warmup_request(resolve_model("google/gemma-4-31B-it")).input_ids)
    assert f"RuntimeError: output with shape [1] doesn't match the broadcast shape [{expected}]" in log
    # the port was open (uvicorn's line) and the warm-up sent, but the server never became ready
    sent, crashed = log.index("warm-up request (as SGLang's"), log.index("Scheduler hit an exception")
    assert log.index(UVICORN_RUNNING) < sent < crashed
    assert READY_LINE not in log


def test_post_fix_eager_survives_its_warmup(sim_server):
    server = sim_server([*EAGER_28264, "--sim-revision", "post-fix"])
    log = server.log_text()
    assert "warm-up request done" in log and log.index("warm-up request done") < log.index(READY_LINE)


NVFP4_GRAPH = ["--model-path", "nvidia/Gemma-4-31B-IT-NVFP4", "--quantization", "modelopt_fp4",
               "--attention-backend", "trtllm_mha", "--speculative-algorithm", "NEXTN",
               "--speculative-draft-model-path", "google/gemma-4-31B-it-assistant", "--speculative-num-steps", "3",
               "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--tp-size", "2",
               "--speculative-draft-model-quantization", "unquant"]
GRAPH_FRAMES = ["draft", "execute", "_init_frozen_kv_metadata_replay_cuda_graph", "init_forward_metadata_out_graph"]


def test_29021_pre_fix_graph_draft_dies_on_its_warm_up(sim_server):
    n = len(warmup_request(resolve_model("nvidia/Gemma-4-31B-IT-NVFP4")).input_ids)
    server = sim_server([*NVFP4_GRAPH, "--sim-revision", "pre-fix"], wait_ready=False)
    assert _wait_exit(server, 40) not in (None, 0)
    log = server.log_text()
    assert (f"RuntimeError: The size of tensor a (48) must match the size of tensor b ({n}) "
            "at non-singleton dimension 0") in log
    positions = [log.find(f"in {name}\n") for name in GRAPH_FRAMES]
    assert all(p >= 0 for p in positions) and positions == sorted(positions), log
    assert log.index(UVICORN_RUNNING) < log.index("Scheduler hit an exception") and READY_LINE not in log
    fixed = sim_server([*NVFP4_GRAPH, "--sim-revision", "post-fix"])
    assert fixed.get("/health")[0] == 200


def test_29021_pre_fix_graph_draft_without_warm_up_waits_for_a_long_prompt(sim_server):
    server = sim_server([*NVFP4_GRAPH, "--sim-revision", "pre-fix", "--skip-server-warmup"])
    ok = server.post("/generate", {"input_ids": _prompt(48), "sampling_params": {"max_new_tokens": 8}}, timeout=20)
    assert ok[0] == 200  # 48 stale slots fit the 48-entry buffer
    with contextlib.suppress(OSError):
        server.post("/generate", {"input_ids": _prompt(49, 1), "sampling_params": {"max_new_tokens": 8}}, timeout=20)
    assert _wait_exit(server) not in (None, 0)
    assert "must match the size of tensor b (49) at non-singleton dimension 0" in server.log_text()


def test_scheduler_dies_with_a_killed_front(sim_server):
    server = sim_server([*GRAPH_28264, "--sim-revision", "post-fix", "--skip-server-warmup"])
    pids = server.tree_pids()
    assert len(pids) >= 2
    # the front only, not its process group: PR_SET_PDEATHSIG must take the scheduler down
    signal_process(server.pid, signal.SIGKILL)
    assert server.wait(10) is not None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(psutil.pid_exists(p) for p in pids[1:]):
        time.sleep(0.1)
    left = [p for p in pids[1:] if alive(p)]
    assert not left


def test_a_scheduler_ended_by_a_signal_takes_the_front_down_as_sglangs_subprocess_watchdog_does(sim_server):
    """SGLang's schedulers have no SIGTERM handler: the SIGTERM the harness sends to the server's process group
    ends them at once, and the launcher's SubprocessWatchdog takes the tree down (harness.contract.facts)."""
    server = sim_server([*GRAPH_28264, "--sim-revision", "post-fix", "--skip-server-warmup"])
    ok = server.post("/generate", {"input_ids": _prompt(32), "sampling_params": {"max_new_tokens": 4}}, timeout=20)
    assert ok[0] == 200  # the running phase: SGLang's running-phase SIGQUIT handler answers
    [scheduler] = [p for p in psutil.Process(server.pid).children()
                   if "spawn_main" in command_line(p)]
    signal_process(scheduler.pid, signal.SIGTERM)
    assert _wait_exit(server) == CHILD_FAILED_SELF_KILL
    log = server.log_text()
    assert f"Subprocess scheduler_0 (pid={scheduler.pid}) crashed with exit code -15. {CHILD_CRASHED_LINE}" in log
    assert log.index(CHILD_CRASHED_LINE) < log.index(CHILD_FAILED_RUNNING_LINE) < log.index("kill_process_tree called:")
