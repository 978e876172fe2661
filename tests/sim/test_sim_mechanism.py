"""The mechanism in tensor code, driven in-process through the scheduler (no HTTP)."""

from __future__ import annotations

import random
import traceback
from multiprocessing.connection import Connection
from typing import cast

import pytest
import torch

from harness.contract.facts import FROZEN_KV_MTP_MAX_RUNNING_DEFAULT
from harness.sim.cli_args import parse_server_args
from harness.sim.cuda_graph_buffer_registry import CudaGraphBufferRegistry
from harness.sim.forward_batch import ForwardBatch, ForwardMode
from harness.sim.scheduler import Scheduler
from harness.sim.server_settings import SettingsError, resolve_settings
from tests.sim.sim_helpers import EAGER_28264, GRAPH_28264


class _Sink:
    def __init__(self) -> None:
        self.messages: list[tuple] = []

    def send(self, msg: tuple) -> None:
        self.messages.append(msg)


def _scheduler(argv: list[str]) -> Scheduler:
    return Scheduler(resolve_settings(parse_server_args(argv)), cast(Connection, _Sink()))  # it only calls send()


def _run(s: Scheduler, lengths: list[int], new: int = 32, seed: int = 0) -> None:
    rng = random.Random(seed)
    for i, n in enumerate(lengths):
        s.add_request({"rid": f"r{i}", "input_ids": [rng.randrange(32000) for _ in range(n)],
                       "sampling_params": {"max_new_tokens": new, "temperature": 0.0, "ignore_eos": True}})
    for _ in range(10_000):
        if not s.has_work():
            return
        s.step()
    raise AssertionError("scheduler did not finish")


def _accept_length(s: Scheduler) -> float:
    value = s.snapshot()["accept_length"]
    assert isinstance(value, float)
    return value


@pytest.mark.parametrize("n", [2, 57, 276])
def test_pre_fix_eager_raises_pytorch_message_with_prompt_length(n):
    s = _scheduler([*EAGER_28264, "--sim-revision", "pre-fix"])
    with pytest.raises(RuntimeError, match=rf"^output with shape \[1\] doesn't match the broadcast shape \[{n}\]$") as info:
        _run(s, [n])
    names = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert names[-7:] == ["draft_forward", "forward", "_forward_raw", "forward_decode", "_eager_fb_view",
                          "fill_from", "_grouped_foreach_copy_"]


def test_pre_fix_eager_prompt_as_long_as_the_batch_does_not_crash():
    # A one-token prompt leaves out_cache_loc with exactly the decode batch's one slot: the stale value fits.
    s = _scheduler([*EAGER_28264, "--sim-revision", "pre-fix"])
    _run(s, [1], new=8)
    st = s.snapshot()
    assert st["completion_tokens"] == 8 and st["draft_kv_writes"] == 0


@pytest.mark.parametrize(("argv", "revision"), [(EAGER_28264, "post-fix"), (GRAPH_28264, "pre-fix"), (GRAPH_28264, "post-fix")])
def test_no_crash_and_draft_never_writes_kv(argv, revision):
    s = _scheduler([*argv, "--sim-revision", revision])
    free = s.allocator.available_size()
    _run(s, [276, 30, 5])
    st = s.snapshot()
    assert st["completion_tokens"] == 3 * 32 and _accept_length(s) > 1
    assert st["draft_kv_writes"] == 0
    # Every slot came back: to the allocator, or into the prefix cache (one slot per token that has KV),
    # which a flush empties.
    assert s.tree_cache is not None and s.allocator.available_size() + s.tree_cache.device_size() == free
    assert s.allocator.available_size() + s.tree_cache.device_tokens == free
    assert s.flush_cache() and s.allocator.available_size() == free


def test_topk_expansion_runs_and_accepts():
    argv = ["--model-path", "google/gemma-4-E4B-it", "--speculative-algorithm", "NEXTN",
            "--speculative-draft-model-path", "google/gemma-4-E4B-it-assistant", "--speculative-num-steps", "5",
            "--speculative-eagle-topk", "3", "--speculative-num-draft-tokens", "12", "--attention-backend", "triton"]
    s = _scheduler(argv)
    _run(s, [40, 40])
    assert 1.5 <= _accept_length(s) <= 4.0  # 3 branches of 3 draft tokens: at most 3 + the bonus


def test_acceptance_rises_with_draft_agreement():
    lengths: list[float] = []
    for agreement in (0.3, 0.7, 1.0):
        s = _scheduler([*GRAPH_28264, "--sim-draft-agreement", str(agreement)])
        _run(s, [60, 60, 60], new=48)
        lengths.append(_accept_length(s))
    assert lengths[0] < lengths[1] < lengths[2]
    assert lengths[2] == pytest.approx(48 / 8)  # full agreement: every 5-token chain accepted


NVFP4 = ["--model-path", "nvidia/Gemma-4-31B-IT-NVFP4", "--quantization", "modelopt_fp4", "--speculative-algorithm",
         "NEXTN", "--speculative-draft-model-path", "google/gemma-4-31B-it-assistant",
         "--speculative-draft-model-quantization", "unquant", "--speculative-num-steps", "3",
         "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
GRAPH_FRAMES = ["draft", "execute", "_init_frozen_kv_metadata_replay_cuda_graph", "init_forward_metadata_out_graph"]


def test_start_up_succeeds_on_both_revisions_with_trtllm_mha_and_swa():
    """sglang 0.5.14 allocates the target pool early for Frozen-KV MTP; nothing raises at start-up (#29021 is not one)."""
    for revision in ("pre-fix", "post-fix"):
        s = _scheduler([*NVFP4, "--attention-backend", "trtllm_mha", "--sim-revision", revision])
        assert s.s.hybrid_swa and s.worker is not None and s.worker.cuda_graph_runner is not None


@pytest.mark.parametrize("n", [49, 276])
def test_pre_fix_graph_path_on_trtllm_swa_raises_the_size_message(n):
    s = _scheduler([*NVFP4, "--attention-backend", "trtllm_mha", "--sim-revision", "pre-fix"])
    limit = FROZEN_KV_MTP_MAX_RUNNING_DEFAULT
    with pytest.raises(RuntimeError, match=rf"^The size of tensor a \({limit}\) must match the size of tensor b "
                                           rf"\({n}\) at non-singleton dimension 0$") as info:
        _run(s, [n], new=8)
    names = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert names[-4:] == GRAPH_FRAMES


def test_pre_fix_graph_path_with_a_one_entry_buffer_gives_the_other_form():
    s = _scheduler([*NVFP4, "--attention-backend", "trtllm_mha", "--max-running-requests", "1", "--sim-revision",
                    "pre-fix"])
    with pytest.raises(RuntimeError, match=r"^output with shape \[1\] doesn't match the broadcast shape \[276\]$") as info:
        _run(s, [276], new=8)
    assert [f.name for f in traceback.extract_tb(info.value.__traceback__)][-4:] == GRAPH_FRAMES


@pytest.mark.parametrize(("extra", "n"), [
    (["--attention-backend", "trtllm_mha", "--sim-revision", "pre-fix"], FROZEN_KV_MTP_MAX_RUNNING_DEFAULT),  # fits
    (["--attention-backend", "triton", "--sim-revision", "pre-fix"], 276),  # triton guards the refill
    (["--attention-backend", "trtllm_mha", "--disable-hybrid-swa-memory", "--sim-revision", "pre-fix"], 276),  # no SWA
    (["--attention-backend", "trtllm_mha", "--sim-revision", "post-fix"], 276),  # the fix drops out_cache_loc
])
def test_graph_path_survives_without_all_of_its_conditions(extra, n):
    s = _scheduler([*NVFP4, *extra])
    _run(s, [n], new=8)
    st = s.snapshot()
    assert st["completion_tokens"] == 8 and st["draft_path"] == "graph"


@pytest.mark.parametrize("flags", [["--disable-cuda-graph"],
                                   ["--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled"],
                                   ["--speculative-num-steps", "1", "--speculative-num-draft-tokens", "2"]])
def test_the_eager_choice_sends_trtllm_swa_down_the_eager_path(flags):
    s = _scheduler([*NVFP4, "--attention-backend", "trtllm_mha", *flags, "--sim-revision", "pre-fix"])
    assert s.worker is not None and s.worker.cuda_graph_runner is None
    with pytest.raises(RuntimeError, match=r"^output with shape \[1\] doesn't match the broadcast shape \[30\]$") as info:
        _run(s, [30], new=8)
    assert [f.name for f in traceback.extract_tb(info.value.__traceback__)][-2:] == ["fill_from", "_grouped_foreach_copy_"]


def test_only_decode_graphs_disabled_keeps_the_graph_path():
    s = _scheduler([*NVFP4, "--attention-backend", "trtllm_mha", "--cuda-graph-backend-decode", "disabled"])
    assert s.worker is not None and s.worker.cuda_graph_runner is not None


def test_frozen_kv_mtp_defaults_and_topk_backend():
    assert _scheduler(NVFP4[:2]).s.max_running_requests != FROZEN_KV_MTP_MAX_RUNNING_DEFAULT  # not speculative
    assert _scheduler(NVFP4).s.max_running_requests == FROZEN_KV_MTP_MAX_RUNNING_DEFAULT
    topk3 = [*NVFP4[:-6], "--speculative-num-steps", "3", "--speculative-eagle-topk", "3",
             "--speculative-num-draft-tokens", "10"]
    with pytest.raises(SettingsError, match="topk > 1 currently supports only the triton attention backend, got trtllm_mha"):
        resolve_settings(parse_server_args([*topk3, "--attention-backend", "trtllm_mha"]))
    with pytest.raises(SettingsError, match="got fa3"):
        resolve_settings(parse_server_args([*topk3, "--attention-backend", "triton",
                                            "--speculative-draft-attention-backend", "fa3"]))
    assert resolve_settings(parse_server_args([*topk3, "--attention-backend", "triton"])).draft_attention_backend == "triton"


@pytest.mark.parametrize("revision", ["pre-fix", "post-fix"])
def test_a_bf16_draft_inheriting_modelopt_fp4_cannot_start_on_either_revision(revision):
    argv = ["--model-path", "nvidia/Gemma-4-31B-IT-NVFP4", "--quantization", "modelopt_fp4", "--speculative-algorithm",
            "NEXTN", "--speculative-draft-model-path", "google/gemma-4-31B-it-assistant", "--attention-backend",
            "triton", "--sim-revision", revision]
    with pytest.raises(SettingsError, match="resolved to modelopt_fp4"):
        resolve_settings(parse_server_args(argv))
    with pytest.raises(SettingsError, match="resolved to modelopt_fp4"):  # asking for it explicitly: the same
        resolve_settings(parse_server_args([*argv, "--speculative-draft-model-quantization", "modelopt_fp4"]))
    resolve_settings(parse_server_args([*argv, "--speculative-draft-model-quantization", "unquant"]))


def test_fill_from_skips_none_and_copies_into_static_buffers():
    reg = CudaGraphBufferRegistry(8, torch.device("cpu"))
    ids = torch.tensor([3, 4], dtype=torch.int64)
    fb = ForwardBatch(ForwardMode.DRAFT_DECODE, 2, ids, ids + 1, ids + 2, ids + 3, out_cache_loc=None)
    view = reg.fill_from(fb, 2)
    assert view["out_cache_loc"] is None
    assert (input_ids := view["input_ids"]) is not None and input_ids.data_ptr() == reg.buffers["input_ids"].data_ptr()
    assert reg.buffers["seq_lens"][:2].tolist() == [5, 6]


def test_server_accept_length_is_folded_every_interval_and_reset_by_flush():
    s = _scheduler([*GRAPH_28264, "--decode-log-interval", "4", "--sim-revision", "post-fix"])
    s.add_request({"rid": "w", "input_ids": [5] * 20, "count_in_stats": False,
                   "sampling_params": {"max_new_tokens": 64, "temperature": 0.0, "ignore_eos": True}})
    s.step()  # the prefill
    for _ in range(3):
        s.step()
    assert s.snapshot()["server_accept_length"] is None  # 3 decode batches: nothing folded yet
    s.step()
    folded = s.snapshot()["server_accept_length"]
    assert isinstance(folded, float) and folded > 1  # includes a request the ground truth leaves out
    assert s.snapshot()["accept_length"] is None
    while s.has_work():
        s.step()
    assert s.flush_cache() and s.snapshot()["server_accept_length"] is None


@pytest.mark.parametrize("argv", [EAGER_28264, [*NVFP4, "--attention-backend", "trtllm_mha"]])
def test_pre_fix_a_prompt_that_joins_a_busy_batch_does_not_crash(argv):
    """Merged into a running batch, the prefill's out_cache_loc is dropped (schedule_batch.py merge_batch);
    the same prompt on an idle server crashes (the tests above)."""
    s = _scheduler([*argv, "--sim-revision", "pre-fix"])
    s.add_request({"rid": "busy", "input_ids": [7], "count_in_stats": False,
                   "sampling_params": {"max_new_tokens": 64, "temperature": 0.0, "ignore_eos": True}})
    s.step()
    s.step()
    assert s.running
    _run(s, [276], new=8)
    assert s.snapshot()["completion_tokens"] == 8
