"""Paged KV memory as SGLang lays it out: request slots, a token-to-KV allocator, per-layer KV buffers.

``req_to_token[req_pool_idx, pos]`` holds the KV slot of token ``pos`` of a request; a forward
batch's ``out_cache_loc`` lists the slots its new tokens are written to (page size 1).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["DraftKVView", "ReqToTokenPool", "TokenToKVPoolAllocator", "KVPool", "OutOfSlotsError"]


class OutOfSlotsError(RuntimeError):
    """No free request slot or KV slot: the scheduler keeps the request waiting."""


class ReqToTokenPool:
    """One row per running request, mapping token positions to KV slots."""

    def __init__(self, size: int, max_context_len: int, device: torch.device) -> None:
        self.req_to_token = torch.zeros((size, max_context_len), dtype=torch.int64, device=device)
        self._free = list(range(size))

    def alloc(self) -> int:
        if not self._free:
            raise OutOfSlotsError("no free request slot")
        return self._free.pop()

    def free(self, idx: int) -> None:
        self._free.append(idx)

    def available(self) -> int:
        return len(self._free)


class TokenToKVPoolAllocator:
    """Hands out KV slot indices; slot 0 is reserved as SGLang reserves it for padding."""

    def __init__(self, size: int, device: torch.device) -> None:
        self.size = size
        self.device = device
        self._free = torch.arange(1, size + 1, dtype=torch.int64, device=device)
        # The prefix cache's eviction (harness.sim.radix_cache): asked for the shortfall before giving up.
        self.evict: Callable[[int], int] | None = None

    def available_size(self) -> int:
        return int(self._free.numel())

    def alloc(self, n: int) -> torch.Tensor:
        if n > self._free.numel() and self.evict is not None:
            self.evict(n - int(self._free.numel()))
        if n > self._free.numel():
            raise OutOfSlotsError(f"need {n} KV slots, {self._free.numel()} free")
        out, self._free = self._free[:n], self._free[n:]
        return out

    def free(self, slots: torch.Tensor) -> None:
        if slots.numel():
            self._free = torch.cat([self._free, slots.to(self.device)])


class KVPool:
    """K and V buffers per layer, indexed by slot; the target writes them, the Frozen-KV draft only reads.

    ``draft_k`` / ``draft_v`` are the draft's view of the same slots (SGLang keeps the draft's cache state
    beside the target's: the packed tail layers or sidecar pools of sglang PR #30393); the target's forward
    writes both, the draft reads only its view (:meth:`draft_view`). They differ only where a HiCache
    load-back restored the target's KV and not the draft's (harness.sim.radix_cache).
    """

    def __init__(self, num_layers: int, size: int, heads: int, head_dim: int, device: torch.device) -> None:
        shape = (size + 1, heads, head_dim)
        self.k = [torch.zeros(shape, device=device) for _ in range(num_layers)]
        self.v = [torch.zeros(shape, device=device) for _ in range(num_layers)]
        self.draft_k = [torch.zeros(shape, device=device) for _ in range(num_layers)]
        self.draft_v = [torch.zeros(shape, device=device) for _ in range(num_layers)]
        self.write_count = 0

    def write(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        self.k[layer][slots] = k
        self.v[layer][slots] = v
        self.draft_k[layer][slots] = k
        self.draft_v[layer][slots] = v
        self.write_count += int(slots.numel())

    def draft_view(self) -> DraftKVView:
        return DraftKVView(self.draft_k, self.draft_v)


class DraftKVView:
    """What the draft attends to: the pool's draft-side buffers under the names the model reads."""

    def __init__(self, k: list[torch.Tensor], v: list[torch.Tensor]) -> None:
        self.k, self.v = k, v
