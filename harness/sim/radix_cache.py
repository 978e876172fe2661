"""The prefix cache: finished sequences' KV slots kept in a token trie, matched by later prompts.

Mirrors what the crash depends on in ``sglang/srt/mem_cache/radix_cache.py`` (0.5.14; page size 1):
a finished request's tokens and their KV slots are inserted (``cache_finished_req`` :438), a new
prompt reuses the longest cached prefix (``match_prefix`` :358), limited to ``len(prompt) - 1`` so
that at least one token is computed (``schedule_batch.py`` ``_compute_max_prefix_len`` :1223-1228),
and only the rest is extended: the prefill's ``out_cache_loc`` has one slot per *extend* token, so a
prefix hit shrinks the N of the crash message, and a fully cached prompt gives N = 1. When slots run
short, unlocked leaves are evicted, least recently used first (``evict`` :558).

With ``--enable-hierarchical-cache`` (``hiradix_cache.py``) an evicted node keeps its KV on the host
tier (up to ``--hicache-ratio`` x the device pool) and still matches; a hit there is loaded back
into fresh device slots (``load_back`` :1141) and joins the prefix (``schedule_policy.py`` :939: the
extend length is what is left), so HiCache hits shrink N too.
The host copy is made at eviction here (SGLang's default write-through makes it earlier; for what
matches it is the same). Without HiCache an evicted prefix is gone and the prompt extends in full.
``/flush_cache`` empties both tiers (``reset`` :335). Node per token, not per run of tokens: the
tiny models' prompts are short, and the shape of the tree does not change what matches.
"""

from __future__ import annotations

import heapq
import itertools

import torch

from harness.sim.memory_pool import KVPool, TokenToKVPoolAllocator

__all__ = ["RadixCache", "MatchResult"]


class _Node:
    __slots__ = ("children", "host_kv", "last_access", "lock_ref", "parent", "slot", "token")

    def __init__(self, parent: _Node | None, token: int, slot: int | None) -> None:
        self.parent = parent
        self.token = token
        self.slot = slot  # None: on the host tier only (HiCache)
        self.children: dict[int, _Node] = {}
        self.host_kv: list[tuple[torch.Tensor, torch.Tensor]] | None = None
        self.lock_ref = 0
        self.last_access = 0


class MatchResult:
    """The matched path, root's child first; the caller locks it while the request runs."""

    def __init__(self, path: list[_Node], host_hit: int) -> None:
        self.path = path
        self.host_hit = host_hit  # how many of them came back from the host tier

    def __len__(self) -> int:
        return len(self.path)


class RadixCache:
    def __init__(self, allocator: TokenToKVPoolAllocator, pool: KVPool, *, hierarchical: bool,
                 host_capacity: int) -> None:
        self.allocator = allocator
        self.pool = pool
        self.hierarchical = hierarchical
        self.host_capacity = host_capacity
        self._clock = itertools.count(1)
        self.reset()

    def reset(self) -> None:
        """Drop everything (``/flush_cache``: only called with no request running, so nothing is locked)."""
        root = getattr(self, "root", None)
        if root is not None:
            slots = [n.slot for n in self._nodes() if n.slot is not None]
            if slots:
                self.allocator.free(torch.tensor(slots, dtype=torch.int64))
        self.root = _Node(None, -1, None)
        self.host_size = 0

    def _nodes(self) -> list[_Node]:
        out: list[_Node] = []
        stack = list(self.root.children.values())
        while stack:
            n = stack.pop()
            out.append(n)
            stack.extend(n.children.values())
        return out

    def device_size(self) -> int:
        return sum(1 for n in self._nodes() if n.slot is not None)

    # -- lookup --------------------------------------------------------------------------------
    def match_prefix(self, token_ids: list[int]) -> MatchResult:
        """The longest cached prefix of ``token_ids[:len - 1]``, host-tier nodes loaded back into device slots."""
        limit = max(len(token_ids) - 1, 0)
        node, path = self.root, []
        now = next(self._clock)
        for tok in token_ids[:limit]:
            child = node.children.get(tok)
            if child is None:
                break
            child.last_access = now
            path.append(child)
            node = child
        match = MatchResult(path, sum(1 for n in path if n.slot is None))
        if match.host_hit:
            self.lock(match, +1)  # what load_back evicts to make room must not be the path itself
            try:
                self._load_back([n for n in path if n.slot is None])
            finally:
                self.lock(match, -1)
        return match

    def _load_back(self, nodes: list[_Node]) -> None:
        # Along any path device nodes come first (eviction takes device leaves), so these are its tail.
        self.evict(len(nodes) - self.allocator.available_size())
        slots = self.allocator.alloc(len(nodes))
        for layer in range(len(self.pool.k)):
            rows = [n.host_kv[layer] for n in nodes if n.host_kv]
            self.pool.k[layer][slots] = torch.stack([k for k, _ in rows])
            self.pool.v[layer][slots] = torch.stack([v for _, v in rows])
        for node, slot in zip(nodes, slots.tolist()):
            node.slot, node.host_kv = slot, None
        self.host_size -= len(nodes)

    def slots_of(self, match: MatchResult) -> torch.Tensor:
        return torch.tensor([n.slot for n in match.path], dtype=torch.int64)

    def lock(self, match: MatchResult, delta: int) -> None:
        for n in match.path:
            n.lock_ref += delta

    # -- insert and evict ----------------------------------------------------------------------
    def insert(self, token_ids: list[int], slots: torch.Tensor) -> None:
        """Cache a finished sequence; a slot whose token is already cached is freed (its twin is kept)."""
        node = self.root
        now = next(self._clock)
        duplicate: list[int] = []
        for tok, slot in zip(token_ids, slots.tolist()):
            child = node.children.get(tok)
            if child is None:
                child = node.children[tok] = _Node(node, tok, slot)
            elif child.slot is None:  # on the host only: this request's slot brings it back to the device
                child.slot, child.host_kv = slot, None
                self.host_size -= 1
            elif child.slot != slot:
                duplicate.append(slot)
            child.last_access = now
            node = child
        if duplicate:
            self.allocator.free(torch.tensor(duplicate, dtype=torch.int64))

    def evict(self, num_tokens: int) -> int:
        """Free at least ``num_tokens`` device slots from unlocked leaves, least recently used first; a parent
        whose last device child went becomes a leaf in turn (one walk of the tree and a heap, as SGLang's)."""
        if num_tokens <= 0:
            return 0

        def evictable(n: _Node) -> bool:
            return (n.slot is not None and n.lock_ref == 0 and n.parent is not None
                    and all(c.slot is None for c in n.children.values()))

        order = itertools.count()  # ties in last_access: first found first
        heap = [(n.last_access, next(order), n) for n in self._nodes() if evictable(n)]
        heapq.heapify(heap)
        freed: list[int] = []
        to_host: list[tuple[_Node, int]] = []
        while len(freed) < num_tokens and heap:
            _, _, node = heapq.heappop(heap)
            if not evictable(node):
                continue
            parent = node.parent
            assert node.slot is not None
            freed.append(node.slot)
            if self.hierarchical and self.host_size < self.host_capacity:
                to_host.append((node, node.slot))
                node.host_kv = []  # filled below: the slot is not reused before the free at the end
                self.host_size += 1
                node.slot = None
            else:
                node.slot = None
                self._drop(node)
            if parent is not None and parent is not self.root and evictable(parent):
                heapq.heappush(heap, (parent.last_access, next(order), parent))
        if to_host:  # one gather per layer, not one per token
            index = torch.tensor([slot for _, slot in to_host], dtype=torch.int64)
            ks = [k[index].clone() for k in self.pool.k]
            vs = [v[index].clone() for v in self.pool.v]
            for j, (node, _) in enumerate(to_host):
                node.host_kv = [(k[j], v[j]) for k, v in zip(ks, vs)]
        if freed:
            self.allocator.free(torch.tensor(freed, dtype=torch.int64))
        return len(freed)

    def _drop(self, node: _Node) -> None:
        # A node leaves the tree with everything below it (host-only nodes under it lose their parent).
        for child in list(node.children.values()):
            if child.slot is None and child.host_kv is not None:
                self.host_size -= 1
            self._drop(child)
        if node.parent is not None:
            node.parent.children.pop(node.token, None)
