"""The reference server following a release's rules (``--sim-rules``), in-process through its scheduler.

These tests can only agree with the reference server (a model); the same claims are checked against the real
wheels in tests/test_release_line.py (test_the_reference_servers_rules_are_the_wheels, test_profiles_along_the_line).
"""

from __future__ import annotations

import traceback

import pytest

from harness.build import parse_build_spec
from harness.sim.cli_args import parse_server_args
from harness.sim.release_rules import DEFAULT_RULES, rules_for
from harness.sim.server_settings import SettingsError, resolve_settings
from harness.util.errors import UserError
from tests.sim.test_sim_mechanism import NVFP4, _run, _scheduler

ONE_STEP = ["--speculative-num-steps", "1", "--speculative-num-draft-tokens", "2"]
OFF = ["--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled"]


def test_one_step_is_eager_by_default_and_on_0_5_15_but_captured_on_0_5_23():
    for rules in ([], ["--sim-rules", "0.5.15"]):
        s = _scheduler([*NVFP4, *ONE_STEP, *rules])
        assert s.s.eager_draft and s.worker is not None and s.worker.cuda_graph_runner is None
    s = _scheduler([*NVFP4, *ONE_STEP, "--sim-rules", "0.5.23"])
    assert not s.s.eager_draft and s.worker is not None and s.worker.cuda_graph_runner is not None
    _run(s, [30], new=8)
    assert s.snapshot()["draft_path"] == "graph"


@pytest.mark.parametrize("off", [OFF, ["--disable-cuda-graph"]])
def test_graphs_off_is_still_eager_on_0_5_23(off):
    s = _scheduler([*NVFP4, *ONE_STEP, *off, "--sim-rules", "0.5.23", "--sim-revision", "pre-fix"])
    assert s.s.eager_draft and s.worker is not None and s.worker.cuda_graph_runner is None
    with pytest.raises(RuntimeError, match=r"^output with shape \[1\] doesn't match the broadcast shape \[30\]$") as info:
        _run(s, [30], new=8)
    assert [f.name for f in traceback.extract_tb(info.value.__traceback__)][-2:] == ["fill_from", "_grouped_foreach_copy_"]


@pytest.mark.parametrize("rules", ["0.5.19", "0.5.21", "0.5.23"])
def test_one_step_pre_fix_from_0_5_19_with_trtllm_swa_takes_the_graph_path_without_a_refill_to_crash(rules):
    """From 0.5.19 trtllm_mha's refill sits behind is_translating, which a Frozen-KV MTP draft never has (the
    profile's guard chain, tests/test_release_line_guards.py): even a pre-fix draft's stale out_cache_loc is not
    copied, and the graph path serves a prompt longer than the 48-entry buffer."""
    steps = ONE_STEP if rules == "0.5.23" else []  # a one-step draft is eager up to 0.5.22: NVFP4's three steps
    s = _scheduler([*NVFP4, *steps, "--attention-backend", "trtllm_mha", "--sim-rules", rules,
                    "--sim-revision", "pre-fix"])
    assert not s.s.eager_draft and s.s.rules.swa_refill == "present-but-unreachable"
    _run(s, [276], new=8)
    assert s.snapshot()["draft_path"] == "graph" and s.snapshot()["completion_tokens"] == 8


def test_one_step_pre_fix_on_the_default_rules_with_trtllm_swa_still_crashes_on_the_graph_path():
    s = _scheduler([*NVFP4, "--attention-backend", "trtllm_mha", "--sim-revision", "pre-fix"])
    with pytest.raises(RuntimeError, match=r"must match the size of tensor b \(276\)") as info:
        _run(s, [276], new=8)
    assert [f.name for f in traceback.extract_tb(info.value.__traceback__)][-1] == "init_forward_metadata_out_graph"


def test_0_5_15s_graph_path_has_no_swa_refill_to_crash():
    s = _scheduler([*NVFP4, "--attention-backend", "trtllm_mha", "--sim-rules", "0.5.15", "--sim-revision", "pre-fix"])
    _run(s, [276], new=8)
    assert s.snapshot()["completion_tokens"] == 8


def test_topk_above_one_on_trtllm_mha_from_0_5_17():
    topk3 = [*NVFP4[:-6], "--speculative-num-steps", "3", "--speculative-eagle-topk", "3",
             "--speculative-num-draft-tokens", "10", "--attention-backend", "trtllm_mha"]
    with pytest.raises(SettingsError, match="supports only the triton attention backend"):
        resolve_settings(parse_server_args([*topk3, "--sim-rules", "0.5.16"]))
    assert resolve_settings(parse_server_args([*topk3, "--sim-rules", "0.5.17"])).draft_attention_backend == "trtllm_mha"


def test_rules_are_a_release_number_from_the_first_modelled_on():
    assert rules_for(None) == DEFAULT_RULES and rules_for("0.5.13.post1").since == "0.5.13"
    assert rules_for("0.5.99").since == "0.5.23"  # newer than the table: the newest modelled
    for bad in ("0.5.11", "latest", "0.5.23rc1"):
        with pytest.raises(ValueError, match="--sim-rules"):
            rules_for(bad)
        with pytest.raises(SystemExit):
            parse_server_args([*NVFP4, "--sim-rules", bad])
        with pytest.raises(UserError, match=f"rules={bad}"):
            parse_build_spec(f"sim:pre-fix,rules={bad}")
    assert parse_build_spec("sim:pre-fix,rules=0.5.23").fields
