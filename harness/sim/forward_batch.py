"""The per-forward record the model runner consumes, with SGLang's field names."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import torch

__all__ = ["ForwardMode", "ForwardBatch", "SeqSpan"]


class ForwardMode(enum.Enum):
    EXTEND = "extend"
    DECODE = "decode"
    TARGET_VERIFY = "target_verify"
    DRAFT_DECODE = "draft_decode"


@dataclass(frozen=True)
class SeqSpan:
    """One attention sequence in the batch: its new tokens ``[start, start+length)`` and cached prefix length."""

    start: int
    length: int
    req_pool_idx: int
    prefix_len: int


@dataclass
class ForwardBatch:
    """Mutable like SGLang's: the draft worker rewrites fields (topk expansion, ``out_cache_loc``)."""

    forward_mode: ForwardMode
    batch_size: int
    input_ids: torch.Tensor
    positions: torch.Tensor
    seq_lens: torch.Tensor
    req_pool_indices: torch.Tensor
    out_cache_loc: torch.Tensor | None
    spans: list[SeqSpan] = field(default_factory=list)
    # Draft only: the tokens each (expanded) row has drafted so far, recomputed each step since
    # the frozen draft keeps no KV of its own.
    draft_history: torch.Tensor | None = None
