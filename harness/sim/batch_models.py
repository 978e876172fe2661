"""Adapters that run the tiny models on a ``ForwardBatch`` (what the model runner calls)."""

from __future__ import annotations

import torch

from harness.sim.forward_batch import ForwardBatch
from harness.sim.memory_pool import KVPool, ReqToTokenPool
from harness.sim.model import FrozenKVDraftHead, TinyTransformer

__all__ = ["TargetBatchModel", "DraftBatchModel"]


class TargetBatchModel:
    """Logits for every new token of the batch; their KV goes to ``out_cache_loc``."""

    def __init__(self, model: TinyTransformer, pool: KVPool, req_pool: ReqToTokenPool) -> None:
        self.model, self.pool, self.req_pool = model, pool, req_pool

    def run(self, forward_batch: ForwardBatch) -> torch.Tensor:
        hidden = self.model.hidden_states(forward_batch.input_ids, forward_batch.positions, forward_batch.spans,
                                          self.pool, self.req_pool.req_to_token, forward_batch.out_cache_loc)
        return self.model.logits(hidden)


class DraftBatchModel:
    """Next-token logits per (topk-expanded) row; reads the target's KV, never writes it."""

    def __init__(self, head: FrozenKVDraftHead, pool: KVPool, req_pool: ReqToTokenPool) -> None:
        self.head, self.pool, self.req_pool = head, pool, req_pool

    def run(self, forward_batch: ForwardBatch) -> torch.Tensor:
        assert forward_batch.draft_history is not None
        rows = list(zip(forward_batch.req_pool_indices.tolist(), forward_batch.seq_lens.tolist()))
        # The draft attends to its own view of the cached tokens (equal to the target's KV unless a HiCache
        # load-back left it stale: harness.sim.radix_cache).
        return self.head.logits(forward_batch.draft_history, forward_batch.seq_lens, rows,
                                self.pool.draft_view(), self.req_pool.req_to_token)
