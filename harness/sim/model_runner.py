"""The model runner: ``forward`` -> ``_forward_raw`` -> ``forward_decode`` -> eager view or graph replay.

Frame names mirror SGLang's ``model_runner.py`` so one crash signature matches both. Decode-mode
batches either replay a "graph" (static buffers captured with a fixed field list; the draft's never
includes ``out_cache_loc`` because the frozen draft writes no KV) or, on the eager path, go through
``_eager_fb_view``, which fills the static buffers with the registry's ``fill_from``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Protocol

import torch

from harness.sim.cuda_graph_buffer_registry import BUFFER_FIELDS, CudaGraphBufferRegistry
from harness.sim.forward_batch import ForwardBatch, ForwardMode

__all__ = ["ModelRunner", "BatchModel", "GraphLikeRunner"]


def _required_buffer(view: Mapping[str, torch.Tensor | None], name: str) -> torch.Tensor:
    buf = view[name]
    if buf is None:
        raise RuntimeError(f"decode view has no {name!r} buffer: only out_cache_loc may be left out of a graph")
    return buf


def _with_buffers(forward_batch: ForwardBatch, view: Mapping[str, torch.Tensor | None]) -> ForwardBatch:
    """``forward_batch`` with its BUFFER_FIELDS replaced by the static-buffer view (None where not filled)."""
    return dataclasses.replace(
        forward_batch,
        input_ids=_required_buffer(view, "input_ids"),
        positions=_required_buffer(view, "positions"),
        seq_lens=_required_buffer(view, "seq_lens"),
        req_pool_indices=_required_buffer(view, "req_pool_indices"),
        out_cache_loc=view["out_cache_loc"],
    )


class BatchModel(Protocol):
    def run(self, forward_batch: ForwardBatch) -> torch.Tensor: ...


class GraphLikeRunner:
    """Stands in for a captured CUDA graph: static buffers for a fixed list of fields, copied one by one."""

    def __init__(self, model: BatchModel, max_bs: int, fields: tuple[str, ...], device: torch.device) -> None:
        self.model = model
        self.fields = fields
        self.max_bs = max_bs
        self.buffers = {name: torch.zeros(max_bs, dtype=torch.int64, device=device) for name in fields}

    def can_run(self, forward_batch: ForwardBatch) -> bool:
        return forward_batch.batch_size <= self.max_bs

    def replay(self, forward_batch: ForwardBatch) -> torch.Tensor:
        bs = forward_batch.batch_size
        view: dict[str, torch.Tensor | None] = {}
        for name in self.fields:  # only captured fields are read
            buf = self.buffers[name][:bs]
            buf.copy_(getattr(forward_batch, name))
            view[name] = buf
        for name in BUFFER_FIELDS:
            if name not in self.fields:
                view[name] = None
        return self.model.run(_with_buffers(forward_batch, view))


class ModelRunner:
    """Runs one model (the target, or the draft head) on forward batches; ``step_cost_s`` models device time."""

    def __init__(self, model: BatchModel, registry: CudaGraphBufferRegistry, graph_runner: GraphLikeRunner | None,
                 step_cost_s: float) -> None:
        self.model = model
        self.registry = registry
        self.graph_runner = graph_runner
        self.step_cost_s = step_cost_s
        self.forward_count = 0

    def forward(self, forward_batch: ForwardBatch) -> torch.Tensor:
        self.forward_count += 1
        out = self._forward_raw(forward_batch)
        if self.step_cost_s > 0:
            time.sleep(self.step_cost_s)
        return out

    def _forward_raw(self, forward_batch: ForwardBatch) -> torch.Tensor:
        if forward_batch.forward_mode in (ForwardMode.DECODE, ForwardMode.DRAFT_DECODE):
            return self.forward_decode(forward_batch)
        return self.model.run(forward_batch)

    def forward_decode(self, forward_batch: ForwardBatch) -> torch.Tensor:
        if self.graph_runner is not None and self.graph_runner.can_run(forward_batch):
            return self.graph_runner.replay(forward_batch)
        return self.model.run(self._eager_fb_view(forward_batch))

    def _eager_fb_view(self, forward_batch: ForwardBatch) -> ForwardBatch:
        view = self.registry.fill_from(forward_batch, forward_batch.batch_size)
        return _with_buffers(forward_batch, view)
