"""The Frozen-KV MTP worker: draft (reads the target's KV, never writes it), topk expansion, verification.

``draft``, ``draft_forward`` and ``_init_frozen_kv_metadata_replay_cuda_graph`` mirror SGLang's frame
names (``frozen_kv_mtp_worker_v2.py``). The draft's forward batch is built from the batch the target
just ran. At ``pre-fix`` it keeps that batch's ``out_cache_loc`` (after a prefill: one slot per prompt
token); at ``post-fix`` ``draft`` sets it to None after ``_expand_for_topk_draft``, as sglang PR #29616
does (0.5.15 :439). ``draft`` then takes the CUDA-graph path when a graph was captured and fits the
batch (``cuda_graph_runner.execute``, 0.5.14 :451), else the eager ``draft_forward`` (:455). A stale
value crashes the eager path in ``fill_from`` (harness.sim.cuda_graph_buffer_registry) and the graph
path in the trtllm_mha backend's SWA refill (harness.sim.trtllm_mha_backend); triton guards that refill.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

import torch

from harness.sim import SIM_LABEL
from harness.sim.forward_batch import ForwardBatch, ForwardMode, SeqSpan
from harness.sim.frozen_kv_mtp_cuda_graph_runner import FrozenKVMTPCudaGraphRunner
from harness.sim.memory_pool import KVPool, ReqToTokenPool, TokenToKVPoolAllocator
from harness.sim.model_runner import BatchModel, ModelRunner
from harness.sim.position_drop import PositionDrop
from harness.sim.req_state import Req
from harness.sim.sampling import sample
from harness.sim.server_settings import chain_length
from harness.sim.trtllm_mha_backend import TRTLLMHAAttnBackend

__all__ = ["FrozenKVMTPWorker"]

logger = logging.getLogger(__name__)


def _draft_history(forward_batch: ForwardBatch) -> torch.Tensor:
    if forward_batch.draft_history is None:
        raise RuntimeError("the draft batch has no draft_history: build it with build_draft_batch")
    return forward_batch.draft_history


def _drafts(req: Req) -> torch.Tensor:
    if req.drafts is None:
        raise RuntimeError(f"request {req.rid} reached verification without drafts")
    return req.drafts


class FrozenKVMTPWorker:
    """Proposes ``topk`` chains per request and verifies them with one target forward."""

    def __init__(self, *, target_runner: ModelRunner, draft_runner: ModelRunner, pool: KVPool,
                 req_pool: ReqToTokenPool, allocator: TokenToKVPoolAllocator, revision: str,
                 num_steps: int, topk: int, num_draft_tokens: int, device: torch.device,
                 draft_attn_backend: TRTLLMHAAttnBackend, position_drop: tuple[int, float] | None = None) -> None:
        self.target_runner = target_runner
        self.draft_runner = draft_runner
        self.pool = pool
        self.req_pool = req_pool
        self.allocator = allocator
        self.revision = revision
        self.topk = topk
        self.chain_len = chain_length(num_steps, topk, num_draft_tokens)
        self.device = device
        self.draft_kv_writes = 0  # stays 0: the frozen draft must never write KV
        # topk 1: the draft model runner's own attention backend; topk > 1: triton (0.5.14 :242-252)
        self.draft_attn_backend = draft_attn_backend
        self.cuda_graph_runner: FrozenKVMTPCudaGraphRunner | None = None
        self.position_drop = PositionDrop(position_drop, logger)  # --sim-position-drop: the model's lever
        logger.info("%s Frozen-KV MTP worker: topk=%d, %d draft token(s) per branch, revision %s",
                    SIM_LABEL, topk, self.chain_len, revision)

    def build_draft_batch(self, reqs: list[Req], last_out_cache_loc: torch.Tensor | None) -> ForwardBatch:
        """The draft's batch, derived from the target batch that just ran (it inherits its ``out_cache_loc``)."""
        dev = self.device
        pending = torch.tensor([r.pending for r in reqs], dtype=torch.int64, device=dev)
        seq_lens = torch.tensor([r.seq_len for r in reqs], dtype=torch.int64, device=dev)
        return ForwardBatch(
            forward_mode=ForwardMode.DRAFT_DECODE, batch_size=len(reqs), input_ids=pending,
            positions=seq_lens.clone(), seq_lens=seq_lens,
            req_pool_indices=torch.tensor([r.req_pool_idx for r in reqs], dtype=torch.int64, device=dev),
            out_cache_loc=last_out_cache_loc, draft_history=pending[:, None].clone(),
        )

    def _expand_for_topk_draft(self, forward_batch: ForwardBatch) -> None:
        k = self.topk
        for name in ("input_ids", "positions", "seq_lens", "req_pool_indices"):
            setattr(forward_batch, name, getattr(forward_batch, name).repeat_interleave(k))
        forward_batch.draft_history = _draft_history(forward_batch).repeat_interleave(k, dim=0)
        forward_batch.batch_size *= k

    def capture_cuda_graph(self, model: BatchModel, max_bs: int) -> None:
        """SGLang's ``_capture_cuda_graphs``; the scheduler calls it unless the draft runs eagerly (:354-362)."""
        self.cuda_graph_runner = FrozenKVMTPCudaGraphRunner(self, model, max_bs, self.device)

    def draft(self, forward_batch: ForwardBatch) -> torch.Tensor:
        """Draft ``[bs, topk, chain_len]`` tokens, on the graph path when it can run, else eagerly."""
        bs, k = forward_batch.batch_size, self.topk
        self._expand_for_topk_draft(forward_batch)
        if self.revision == "post-fix":
            # The fix (sglang PR #29616): the frozen draft writes no KV, so it carries no slots.
            forward_batch.out_cache_loc = None
        if self.cuda_graph_runner is not None and self.cuda_graph_runner.can_run_graph(forward_batch):
            history = self.cuda_graph_runner.execute(forward_batch)
        else:
            history = self.draft_forward(forward_batch)
        return history[:, 1:].reshape(bs, k, self.chain_len)

    def _init_frozen_kv_metadata_replay_cuda_graph(self, forward_batch: ForwardBatch, bs: int) -> None:
        # SGLang's fb_view keeps getattr(forward_batch, "out_cache_loc", None) (0.5.14 :347).
        fb_view = dataclasses.replace(forward_batch, batch_size=bs, forward_mode=ForwardMode.DRAFT_DECODE)
        self.draft_attn_backend.init_forward_metadata_out_graph(fb_view)

    def draft_forward(self, forward_batch: ForwardBatch,
                      run: Callable[[ForwardBatch], torch.Tensor] | None = None) -> torch.Tensor:
        """``chain_len`` steps over the expanded batch: topk at the first step, greedy per branch after.

        Eager: every step through the draft model runner (its eager view, ``fill_from``). The CUDA graph
        captured this loop, so ``FrozenKVMTPCudaGraphRunner.execute`` replays it with ``run`` = its replay.
        """
        run = run or self.draft_runner.forward
        k = self.topk
        bs = forward_batch.batch_size // k
        writes_before = self.pool.write_count
        for step in range(self.chain_len):
            logits = run(forward_batch)
            nxt = logits.view(bs, k, -1)[:, 0].topk(k, dim=-1).indices.reshape(-1) if step == 0 else logits.argmax(-1)
            forward_batch.draft_history = torch.cat([_draft_history(forward_batch), nxt[:, None]], dim=1)
            forward_batch.input_ids = nxt
            forward_batch.positions = forward_batch.positions + 1
        self.draft_kv_writes += self.pool.write_count - writes_before
        return _draft_history(forward_batch)

    def verify(self, reqs: list[Req]) -> tuple[list[list[int]], torch.Tensor]:
        """Run the target on every branch; keep the longest matching prefix plus the bonus token.

        Returns the new tokens per request and, per request, the last KV slot kept (the
        ``out_cache_loc`` the next draft batch inherits).
        """
        k, n, dev = self.topk, self.chain_len + 1, self.device
        ids: list[int] = []
        positions: list[int] = []
        spans: list[SeqSpan] = []
        for r in reqs:
            drafts = _drafts(r)
            for c in range(k):
                spans.append(SeqSpan(start=len(ids), length=n, req_pool_idx=r.req_pool_idx, prefix_len=r.seq_len))
                ids.extend([r.pending, *drafts[c].tolist()])
                positions.extend(range(r.seq_len, r.seq_len + n))
        slots = self.allocator.alloc(len(ids))
        fb = ForwardBatch(
            forward_mode=ForwardMode.TARGET_VERIFY, batch_size=len(reqs),
            input_ids=torch.tensor(ids, dtype=torch.int64, device=dev),
            positions=torch.tensor(positions, dtype=torch.int64, device=dev),
            seq_lens=torch.tensor([r.seq_len for r in reqs], dtype=torch.int64, device=dev),
            req_pool_indices=torch.tensor([r.req_pool_idx for r in reqs], dtype=torch.int64, device=dev),
            out_cache_loc=slots, spans=spans,
        )
        logits = self.target_runner.forward(fb).view(len(reqs), k, n, -1)
        slots = slots.view(len(reqs), k, n)
        new_tokens: list[list[int]] = []
        last_locs: list[torch.Tensor] = []
        for i, r in enumerate(reqs):
            drafts = _drafts(r)
            target = sample(logits[i].reshape(k * n, -1), r.temperature, r.generator).view(k, n)
            match = (drafts.to(dev) == target[:, : n - 1]).to(torch.int64).cumprod(dim=1).sum(dim=1)
            best = int(match.argmax())
            a = int(match[best])
            a = self.position_drop.cut(a)
            keep = slots[i, best, : a + 1]
            dropped = torch.ones((k, n), dtype=torch.bool, device=dev)
            dropped[best, : a + 1] = False
            self.allocator.free(slots[i][dropped])
            self.req_pool.req_to_token[r.req_pool_idx, r.seq_len : r.seq_len + a + 1] = keep
            r.seq_len += a + 1
            r.verify_ct += 1
            r.accepted_drafts += a
            r.proposed_drafts += self.chain_len
            if len(r.accept_histogram) <= a:  # grows as SGLang's update_spec_correct_drafts_histogram does
                r.accept_histogram.extend([0] * (a + 1 - len(r.accept_histogram)))
            r.accept_histogram[a] += 1
            new_tokens.append([*drafts[best, :a].tolist(), int(target[best, a])])
            last_locs.append(keep[-1:])
        return new_tokens, torch.cat(last_locs)
