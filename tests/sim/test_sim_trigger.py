"""When the stale ``out_cache_loc`` is there, and how long it is: the trigger conditions of sglang#28264/#29021.

Each test drives the reference server's scheduler in-process at ``pre-fix`` and shows one condition
that SGLang's code decides (traced in harness.contract.facts STALE_ONLY_IN_A_FRESH_RUNNING_BATCH and in
harness.sim.radix_cache): N is the prefill's *extend* tokens (a cached prefix takes no slot, a
chunked prompt reports its last chunk), and the value survives only when the finished prefill batch
becomes the running batch as it is. Each crash is checked against the same traffic that does not crash.
"""

from __future__ import annotations

import random
from multiprocessing.connection import Connection
from typing import cast

import pytest

from harness.contract.facts import FROZEN_KV_MTP_MAX_RUNNING_DEFAULT
from harness.sim.cli_args import parse_server_args
from harness.sim.scheduler import Scheduler
from harness.sim.server_settings import resolve_settings
from tests.sim.sim_helpers import EAGER_28264

NVFP4_TRTLLM = ["--model-path", "nvidia/Gemma-4-31B-IT-NVFP4", "--quantization", "modelopt_fp4",
                "--speculative-algorithm", "NEXTN", "--speculative-draft-model-path", "google/gemma-4-31B-it-assistant",
                "--speculative-draft-model-quantization", "unquant", "--speculative-num-steps", "3",
                "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--attention-backend", "trtllm_mha"]
EAGER_MSG = r"^output with shape \[1\] doesn't match the broadcast shape \[{n}\]$"
GRAPH_MSG = r"^The size of tensor a \({limit}\) must match the size of tensor b \({n}\) at non-singleton dimension 0$"


class _Sink:
    def __init__(self) -> None:
        self.messages: list[tuple] = []

    def send(self, msg: tuple) -> None:
        self.messages.append(msg)


def _scheduler(argv: list[str]) -> Scheduler:
    return Scheduler(resolve_settings(parse_server_args([*argv, "--sim-revision", "pre-fix"])),
                     cast(Connection, _Sink()))


def _prompt(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(1000, 30000) for _ in range(n)]


def _add(s: Scheduler, rid: str, ids: list[int], new: int = 8) -> None:
    s.add_request({"rid": rid, "input_ids": list(ids), "count_in_stats": True,
                   "sampling_params": {"max_new_tokens": new, "temperature": 0.0, "ignore_eos": True}})


def _drain(s: Scheduler) -> None:
    for _ in range(20_000):
        if not s.has_work():
            return
        s.step()
    raise AssertionError("scheduler did not finish")


def _until_finished(s: Scheduler, rid: str) -> None:
    for _ in range(20_000):
        if not any(r.rid == rid for r in [*s.waiting, *s.running, *([s.chunked_req] if s.chunked_req else [])]):
            return
        s.step()
    raise AssertionError(f"{rid} did not finish")


def _busy(s: Scheduler, new: int = 400) -> None:
    """A one-token request (N = 1 fits the decode batch: no crash) that keeps a batch running."""
    _add(s, "busy", [7], new=new)
    s.step()
    assert s.running


def _cached_tokens(s: Scheduler, rid: str) -> int:
    outs = [m for m in cast(_Sink, s.out).messages if m[0] == "out" and m[1] == rid and m[4] is not None]
    return int(outs[-1][3]["cached_tokens"])


def _cache_a_prompt(argv: list[str], a: list[int]) -> Scheduler:
    """An idle pre-fix server whose prefix cache holds ``a``: it ran merged into a busy batch, so it did not crash."""
    s = _scheduler(argv)
    _busy(s, new=40)
    _add(s, "a", a)
    _drain(s)
    return s


# -- a prompt whose prefix is already cached ---------------------------------------------------------

@pytest.mark.parametrize("argv", [EAGER_28264, NVFP4_TRTLLM])
def test_a_fully_cached_prompt_extends_one_token_and_does_not_crash(argv):
    a = _prompt(276, 1)
    s = _cache_a_prompt(argv, a)
    _add(s, "again", a)
    _drain(s)  # idle server, the stale value is there, but it is one slot long
    assert _cached_tokens(s, "again") == 275


def test_a_cached_prefix_shrinks_n_to_the_extend_tokens():
    a = _prompt(276, 1)
    s = _cache_a_prompt(EAGER_28264, a)
    _add(s, "longer", [*a, 5, 6, 7, 8, 9])  # 276 cached, 5 to extend
    with pytest.raises(RuntimeError, match=EAGER_MSG.format(n=5)):
        _drain(s)


def test_the_graph_path_crashes_only_when_the_uncached_part_outgrows_its_buffer():
    a = _prompt(276, 1)
    limit = FROZEN_KV_MTP_MAX_RUNNING_DEFAULT
    s = _cache_a_prompt(NVFP4_TRTLLM, a)
    _add(s, "fits", [*a, *_prompt(limit, 2)])  # 48 uncached tokens: they fit the 48-entry SWA buffer
    _drain(s)
    _add(s, "outgrows", [*a, *_prompt(limit + 12, 3)])
    with pytest.raises(RuntimeError, match=GRAPH_MSG.format(limit=limit, n=limit + 12)):
        _drain(s)


def test_without_the_radix_cache_the_same_prompt_extends_in_full():
    a = _prompt(276, 1)
    # SGLang refuses --disable-radix-cache with --enable-hierarchical-cache (server_args.py 0.5.14 :5937).
    s = _cache_a_prompt([*(x for x in EAGER_28264 if x != "--enable-hierarchical-cache"), "--disable-radix-cache"], a)
    _add(s, "again", a)
    with pytest.raises(RuntimeError, match=EAGER_MSG.format(n=276)):
        _drain(s)


# -- HiCache: a prefix evicted from the device still matches on the host tier -------------------------

def _evict_a(argv: list[str], a: list[int]) -> Scheduler:
    """Cache ``a``, then make a second long prompt (merged, so no crash) need its slots."""
    s = _scheduler([*argv, "--max-total-tokens", "700"])
    _busy(s, new=300)
    _add(s, "a", a)
    _until_finished(s, "a")
    assert s.tree_cache is not None and s.tree_cache.device_size() >= 276
    _add(s, "other", _prompt(300, 9))
    _drain(s)
    return s


def test_without_hicache_an_evicted_prefix_is_gone_and_n_is_what_is_left():
    a = _prompt(276, 1)
    s = _evict_a([arg for arg in EAGER_28264 if arg not in ("--enable-hierarchical-cache",)], a)
    assert s.tree_cache is not None and not s.tree_cache.hierarchical
    on_device = len(s.tree_cache.match_prefix(a))
    assert on_device < 275  # part of a was evicted, and nothing kept it
    _add(s, "again", a)
    with pytest.raises(RuntimeError, match=EAGER_MSG.format(n=276 - on_device)):
        _drain(s)


def test_with_hicache_an_evicted_prefix_comes_back_from_the_host_and_n_is_one():
    a = _prompt(276, 1)
    s = _evict_a(EAGER_28264, a)  # EAGER_28264 is #28264's own launch: --enable-hierarchical-cache
    assert s.tree_cache is not None and s.tree_cache.hierarchical and s.tree_cache.host_size > 0
    _add(s, "again", a)
    _drain(s)
    assert _cached_tokens(s, "again") == 275


# -- chunked prefill: the last chunk is what the running batch keeps ----------------------------------

@pytest.mark.parametrize(("n", "chunk", "last"), [(276, 256, 20), (600, 256, 88)])
def test_a_chunked_prompt_reports_its_last_chunk(n, chunk, last):
    s = _scheduler([*EAGER_28264, "--chunked-prefill-size", str(chunk)])
    _add(s, "long", _prompt(n, 4))
    with pytest.raises(RuntimeError, match=EAGER_MSG.format(n=last)):
        _drain(s)


def test_a_last_chunk_of_one_token_does_not_crash():
    s = _scheduler([*EAGER_28264, "--chunked-prefill-size", "256"])
    _add(s, "long", _prompt(257, 4))
    _drain(s)
    assert s.snapshot()["completion_tokens"] == 8


def test_chunking_keeps_the_graph_path_under_its_buffer():
    limit = FROZEN_KV_MTP_MAX_RUNNING_DEFAULT
    s = _scheduler([*NVFP4_TRTLLM, "--chunked-prefill-size", "256"])
    _add(s, "long", _prompt(256 + limit, 5))  # last chunk 48: fits
    _drain(s)
    s = _scheduler([*NVFP4_TRTLLM, "--chunked-prefill-size", "-1"])
    _add(s, "long", _prompt(256 + limit, 5))
    with pytest.raises(RuntimeError, match=GRAPH_MSG.format(limit=limit, n=256 + limit)):
        _drain(s)


def test_a_prompt_prefilled_beside_a_chunked_one_is_filtered_out_of_the_stale_batch():
    # One prefill batch holds a whole short prompt and the first chunk of a long one: the chunked request
    # leaves the batch (filter_batch), which drops out_cache_loc; its last chunk is merged: no crash.
    s = _scheduler([*EAGER_28264, "--chunked-prefill-size", "256"])
    _add(s, "short", _prompt(100, 6))
    _add(s, "long", _prompt(276, 7))
    _drain(s)
    assert s.snapshot()["completion_tokens"] == 16
    s = _scheduler([*EAGER_28264, "--chunked-prefill-size", "-1"])  # one batch of 376 tokens, kept as it is
    _add(s, "short", _prompt(100, 6))
    _add(s, "long", _prompt(276, 7))
    # Two rows: torch's other form of the message, as in trtllm_mha's 48-entry buffer.
    with pytest.raises(RuntimeError, match=GRAPH_MSG.format(limit=2, n=376)):
        _drain(s)


# -- a request that finishes at its prefill filters the batch too -------------------------------------

def test_a_batch_mate_finishing_at_prefill_drops_the_stale_value():
    s = _scheduler(EAGER_28264)
    _add(s, "one", _prompt(50, 8), new=1)  # finished by its prefill token: filter_batch removes it
    _add(s, "long", _prompt(276, 9))
    _drain(s)
    assert s.snapshot()["completion_tokens"] == 9


# -- the attention backend SGLang picks for Gemma-4 when none is given --------------------------------

def test_gemma4_defaults_to_trtllm_mha_only_on_sm100():
    no_backend = [a for a in NVFP4_TRTLLM if a not in ("--attention-backend", "trtllm_mha")]
    assert _scheduler(no_backend).s.draft_attention_backend == "triton"  # CPU, L40S, H100: triton
    assert _scheduler([*no_backend, "--sim-gpu-sm", "9"]).s.draft_attention_backend == "triton"
    assert _scheduler([*no_backend, "--sim-gpu-sm", "10"]).s.draft_attention_backend == "trtllm_mha"
    assert _scheduler([*no_backend, "--sim-gpu-sm", "10", "--attention-backend", "triton"]).s.attention_backend == "triton"


def test_the_28264_graph_case_crashes_on_sm100_where_the_default_is_trtllm_mha():
    """The #28264 scenario's graph case gives no backend: on L40S (triton, guarded) it passes; the same flags on
    an SM100 GPU get trtllm_mha, whose unguarded SWA refill takes the stale value."""
    from tests.sim.sim_helpers import GRAPH_28264

    s = _scheduler(GRAPH_28264)
    _add(s, "p", _prompt(276, 10))
    _drain(s)
    s = _scheduler([*GRAPH_28264, "--sim-gpu-sm", "10"])
    _add(s, "p", _prompt(276, 10))
    with pytest.raises(RuntimeError, match=GRAPH_MSG.format(limit=FROZEN_KV_MTP_MAX_RUNNING_DEFAULT, n=276)):
        _drain(s)
