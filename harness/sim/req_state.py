"""A request's state inside the scheduler."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the torch-free stand-in (harness.sim.standin) keeps the same request state
    import torch

    from harness.sim.radix_cache import MatchResult

__all__ = ["Req"]


@dataclass
class Req:
    """``seq_len`` tokens have KV in the pool; ``pending`` is the last output token, whose KV is not yet written."""

    rid: str
    input_ids: list[int]
    max_new_tokens: int
    temperature: float
    ignore_eos: bool
    stop_token_ids: tuple[int, ...]
    count_in_stats: bool = True
    generator: torch.Generator | None = None
    req_pool_idx: int = -1
    seq_len: int = 0
    pending: int = -1
    output_ids: list[int] = field(default_factory=list)
    drafts: torch.Tensor | None = None  # [topk, chain_len] proposed by the last draft
    verify_ct: int = 0
    accepted_drafts: int = 0
    proposed_drafts: int = 0
    accept_histogram: list[int] = field(default_factory=list)
    finish_reason: dict | None = None
    cached_tokens: int = 0  # prompt tokens found in the prefix cache, device + host (meta_info.cached_tokens)
    cached_tokens_host: int = 0  # of those, loaded back from the host tier
    prefix_match: MatchResult | None = None  # the cached path it holds locked while it runs
    sent_len: int = 0
    created: float = field(default_factory=time.monotonic)

    def meta_info(self, speculative: bool) -> dict:
        meta = {
            "id": self.rid,
            "prompt_tokens": len(self.input_ids),
            "completion_tokens": len(self.output_ids),
            "cached_tokens": self.cached_tokens,
            "finish_reason": self.finish_reason,
        }
        if self.cached_tokens:
            # SGLang's get_cached_tokens_details (output_streamer.py 0.5.14 :58-80): device and host portions.
            meta["cached_tokens_details"] = {"device": self.cached_tokens - self.cached_tokens_host,
                                             "host": self.cached_tokens_host}
        if speculative:
            ct = self.verify_ct
            meta.update(
                spec_verify_ct=ct,
                spec_accept_length=(len(self.output_ids) / ct) if ct else 0.0,
                spec_accept_rate=(self.accepted_drafts / self.proposed_drafts) if self.proposed_drafts else 0.0,
                spec_num_correct_drafts=self.accepted_drafts,
                spec_num_proposed_drafts=self.proposed_drafts,
            )
            if self.accept_histogram:
                # Bucket j counts verify steps that accepted exactly j drafts (bonus excluded); the list grows to
                # the largest j seen; both names carry it (tokenizer_manager.py 0.5.14 :2341-2353).
                meta["spec_correct_drafts_histogram"] = list(self.accept_histogram)
                meta["spec_accept_histogram"] = list(self.accept_histogram)
        return meta
