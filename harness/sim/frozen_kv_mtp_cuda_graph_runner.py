"""The Frozen-KV MTP draft's CUDA graph: ``execute`` refills the static inputs and replays the draft loop.

Mirrors ``sglang/srt/speculative/frozen_kv_mtp_cuda_graph_runner.py`` (0.5.14): the graph is
captured for up to ``max_bs`` requests x ``topk`` rows (``max_num_token``, :117); ``execute`` copies
the batch into the static buffers, then asks the worker to refresh the attention backend's replay
metadata (``_init_frozen_kv_metadata_replay_cuda_graph``, :398), whose view still carries the forward
batch's ``out_cache_loc``. The loop itself never reads ``out_cache_loc`` (the frozen draft writes no
KV); only the attention backend's SWA refill does (harness.sim.trtllm_mha_backend).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from harness.sim.cuda_graph_buffer_registry import BUFFER_FIELDS
from harness.sim.forward_batch import ForwardBatch
from harness.sim.model_runner import BatchModel, GraphLikeRunner

if TYPE_CHECKING:
    from harness.sim.frozen_kv_mtp_worker import FrozenKVMTPWorker

__all__ = ["FrozenKVMTPCudaGraphRunner"]


class FrozenKVMTPCudaGraphRunner:
    def __init__(self, worker: FrozenKVMTPWorker, model: BatchModel, max_bs: int, device: torch.device) -> None:
        self.worker = worker
        self.max_bs = max_bs
        self.max_num_token = max_bs * worker.topk
        self.graph = GraphLikeRunner(model, self.max_num_token,
                                     tuple(f for f in BUFFER_FIELDS if f != "out_cache_loc"), device)
        worker.draft_attn_backend.init_cuda_graph_state(self.max_bs, self.max_num_token)

    def can_run_graph(self, forward_batch: ForwardBatch) -> bool:
        return forward_batch.batch_size // self.worker.topk <= self.max_bs

    def execute(self, forward_batch: ForwardBatch) -> torch.Tensor:
        bs = forward_batch.batch_size
        self.worker._init_frozen_kv_metadata_replay_cuda_graph(forward_batch, bs)
        return self.worker.draft_forward(forward_batch, self.graph.replay)
