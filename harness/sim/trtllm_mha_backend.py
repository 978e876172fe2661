"""The trtllm_mha attention backend's CUDA-graph replay metadata, as far as the Frozen-KV MTP draft needs it.

Mirrors ``sglang/srt/layers/attention/trtllm_mha_backend.py`` (0.5.14): ``init_cuda_graph_state``
allocates the SWA write-target buffer ``cuda_graph_swa_out_cache_loc`` (``max_num_tokens`` = the draft
graph's max_bs x topk entries) when the KV pool is hybrid SWA; ``init_forward_metadata_out_graph``
refills it from the forward batch's ``out_cache_loc`` before each replay, with no bound check (0.5.14
:642-648). A stale prefill ``out_cache_loc`` longer than the buffer cannot be copied into the
buffer's ``[:n]`` slice, and PyTorch raises ``The size of tensor a (48) must match the size of tensor
b (N) at non-singleton dimension 0`` (``output with shape [1] doesn't match the broadcast shape [N]``
for a one-entry buffer). Cited in ``harness.contract.facts`` (TRTLLM_SWA_REFILL).
"""

from __future__ import annotations

import torch

from harness.sim.forward_batch import ForwardBatch

__all__ = ["TRTLLMHAAttnBackend"]


class TRTLLMHAAttnBackend:
    """``use_sliding_window_kv_pool``: the KV pool is SWA (hybrid SWA memory on a sliding-window model)."""

    name = "trtllm_mha"

    def __init__(self, use_sliding_window_kv_pool: bool, device: torch.device, refill: bool = True) -> None:
        self.use_sliding_window_kv_pool = use_sliding_window_kv_pool
        self.device = device
        # False: the release's graph path has no refill a Frozen-KV MTP draft runs (none in 0.5.15-0.5.18;
        # from 0.5.19 one behind is_translating, which such a draft never has; harness.sim.release_rules)
        self.refill = refill
        self.cuda_graph_swa_out_cache_loc: torch.Tensor | None = None

    def init_cuda_graph_state(self, max_bs: int, max_num_tokens: int) -> None:
        del max_bs
        self.cuda_graph_swa_out_cache_loc = (
            torch.zeros(max_num_tokens, dtype=torch.int64, device=self.device)
            if self.use_sliding_window_kv_pool else None
        )

    def init_forward_metadata_out_graph(self, forward_batch: ForwardBatch) -> None:
        if self.refill and self.use_sliding_window_kv_pool and forward_batch.out_cache_loc is not None:
            assert self.cuda_graph_swa_out_cache_loc is not None, "init_cuda_graph_state first"
            n = forward_batch.out_cache_loc.shape[0]
            self.cuda_graph_swa_out_cache_loc[n:].zero_()
            self.cuda_graph_swa_out_cache_loc[:n].copy_(forward_batch.out_cache_loc)
