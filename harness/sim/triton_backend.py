"""The triton attention backend's CUDA-graph replay metadata, as far as the Frozen-KV MTP draft needs it.

Mirrors ``sglang/srt/layers/attention/triton_backend.py`` ``_fill_cuda_graph_swa_out_cache_loc``
(0.5.14 :560): the same SWA write-target refill as trtllm_mha, but guarded: an ``out_cache_loc``
that is None or longer than the buffer is skipped (:569-573, the test at :570-571), so a stale prefill value never raises
here. The reference server also uses this guarded refill for the other attention backends it accepts
(a modelling choice: only triton and trtllm_mha are traced in SGLang).
"""

from __future__ import annotations

import torch

from harness.sim.forward_batch import ForwardBatch
from harness.sim.trtllm_mha_backend import TRTLLMHAAttnBackend

__all__ = ["TritonAttnBackend", "make_attn_backend"]


class TritonAttnBackend(TRTLLMHAAttnBackend):
    name = "triton"

    def init_forward_metadata_out_graph(self, forward_batch: ForwardBatch) -> None:
        self._fill_cuda_graph_swa_out_cache_loc(forward_batch)

    def _fill_cuda_graph_swa_out_cache_loc(self, forward_batch: ForwardBatch) -> torch.Tensor | None:
        if not self.use_sliding_window_kv_pool or self.cuda_graph_swa_out_cache_loc is None:
            return None
        out_cache_loc = forward_batch.out_cache_loc
        if out_cache_loc is None or out_cache_loc.shape[0] > self.cuda_graph_swa_out_cache_loc.shape[0]:
            return None
        n = out_cache_loc.shape[0]
        self.cuda_graph_swa_out_cache_loc[n:].zero_()
        self.cuda_graph_swa_out_cache_loc[:n].copy_(out_cache_loc)
        return self.cuda_graph_swa_out_cache_loc[:n]


def make_attn_backend(name: str, use_sliding_window_kv_pool: bool, device: torch.device,
                      swa_refill: str = "unguarded") -> TRTLLMHAAttnBackend:
    """trtllm_mha's unguarded refill for trtllm_mha (none in its graph path where the release has none, or has
    one a Frozen-KV MTP draft cannot reach: ``swa_refill``, harness.sim.release_rules); triton's guarded one for
    every other backend."""
    if name == "trtllm_mha":
        return TRTLLMHAAttnBackend(use_sliding_window_kv_pool, device, refill=swa_refill == "unguarded")
    return TritonAttnBackend(use_sliding_window_kv_pool, device)
