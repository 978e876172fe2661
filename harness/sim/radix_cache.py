"""The prefix cache: a radix tree over token ids with a device tier and, with HiCache, a host tier.

Modelled on SGLang's ``RadixCache`` / ``HiRadixCache`` (``srt/mem_cache/``, 0.5.14; page size 1): a
finished request's tokens and their KV slots go into the tree instead of back to the allocator
(``cache_finished_req`` radix_cache.py :438); a new prompt reuses the longest cached prefix (``match_prefix``
:358), limited by the caller to ``len(prompt) - 1`` so that at least one token is computed
(``schedule_batch.py`` ``_compute_max_prefix_len`` :1223-1228), and only the rest is extended. ``cached_tokens``
in ``meta_info`` is counted as SGLang counts it (``schedule_batch.py`` :2104-2105, the device / host split
:2126-2127). When the allocator runs short, unlocked leaves are evicted, least recently used first
(``evict`` :558; a node on the device implies its parents are, so the device tier stays prefix-closed).
Without HiCache an evicted node is gone; with it (``hiradix_cache.py``), its KV is backed up to the host pool
(``hicache_ratio`` x the device pool, as ``memory_pool_host.py`` sizes it: 0.5.14 :1440, 0.5.15 :1754;
``--hicache-size`` overrides it) and still matches; a later hit loads it back into fresh device slots
(``load_back`` hiradix_cache.py :1141) and joins the prefix (``schedule_policy.py`` :939: the extend length is
what is left). The host copy is made at eviction here (SGLang's default write-through makes it earlier; for
what matches it is the same). ``/flush_cache`` empties both tiers (``reset`` :335). Node per token, not per
run of tokens: the tiny models' prompts are short, and the shape of the tree does not change what matches.

The load-back copies what ``restore`` copies: the target's KV always; the draft's view of those tokens
(the sidecar of :class:`harness.sim.memory_pool.KVPool`) only when the reference server runs with
``--sim-draft-cache post-fix``. At ``pre-fix`` the draft reads whatever its view held in the reused
device slots (another request's tokens): the cache-state acceptance bug of sglang#32176 (HiCache
load-back, acceptance 4.487 -> 1.589, back after ``/flush_cache``) and of PRs #27953 / #17338 (the
draft pool was not loaded back with the target's). One tree serves both mechanisms modelled here: the
stale ``out_cache_loc`` of #28264 holds one slot per *extended* token (the prefill's ``out_cache_loc`` has
one slot per extend token), so its length is the prompt less the cached prefix: a prefix hit, on the device
or loaded back from the host, shrinks the N of the crash message, and a fully cached prompt gives N = 1.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

__all__ = ["HostPool", "MatchResult", "RadixCache", "TreeNode"]


@dataclass(eq=False)
class TreeNode:
    token: int
    parent: TreeNode | None
    children: dict[int, TreeNode] = field(default_factory=dict)
    slot: int = -1  # device KV slot; -1 when the node's KV is only on the host
    host: int = -1  # host slot; -1 when not backed up
    lock: int = 0
    tick: int = 0


class HostPool:
    """Host copies of target KV and of the draft's view, slot-indexed, with a free list."""

    def __init__(self, size: int, layers: int, shape: tuple[int, ...]) -> None:
        self.size = size
        full = (max(size, 1), *shape)
        self.k = [torch.zeros(full) for _ in range(layers)]
        self.v = [torch.zeros(full) for _ in range(layers)]
        self.draft_k = [torch.zeros(full) for _ in range(layers)]
        self.draft_v = [torch.zeros(full) for _ in range(layers)]
        self._free = list(range(size))

    def available(self) -> int:
        return len(self._free)

    def alloc(self) -> int:
        return self._free.pop()

    def free(self, slot: int) -> None:
        self._free.append(slot)

    def clear(self) -> None:
        self._free = list(range(self.size))


class MatchResult:
    """The matched path, root's child first, and how many of its nodes are on the host tier only (they come
    last: the device tier is prefix-closed); the caller locks it while the request runs."""

    def __init__(self, path: list[TreeNode], host_hit: int) -> None:
        self.path = path
        self.host_hit = host_hit

    def __len__(self) -> int:
        return len(self.path)


class RadixCache:
    """Device tier over the allocator's slots; host tier when ``host`` is given.

    ``backup(device_slot, host_slot)`` and ``restore(host_slot, device_slot)`` move one token's KV; the
    scheduler binds them to its pools. ``free(slots)`` returns device slots to the allocator.
    """

    def __init__(self, free: Callable[[torch.Tensor], None], host: HostPool | None = None,
                 backup: Callable[[list[int], list[int]], None] | None = None,
                 restore: Callable[[list[int], list[int]], None] | None = None) -> None:
        self.root = TreeNode(token=-1, parent=None)
        self._free = free
        self.host = host
        self._backup = backup
        self._restore = restore
        self._ticks = itertools.count(1)
        self.device_tokens = 0
        self.evicted_tokens = 0
        self.loaded_back_tokens = 0

    # -- lookup -----------------------------------------------------------------------------------
    @property
    def hierarchical(self) -> bool:
        """Whether a host tier (HiCache) backs up evicted nodes."""
        return self.host is not None

    @property
    def host_size(self) -> int:
        """Tokens held on the host tier."""
        return 0 if self.host is None else self.host.size - self.host.available()

    def device_size(self) -> int:
        """Device slots the tree holds."""
        return self.device_tokens

    def match_prefix(self, tokens: Sequence[int]) -> MatchResult:
        """The longest path of ``tokens`` in the tree (device or host nodes) and how many of them are host-only.
        The caller passes the prompt less its last token (``_compute_max_prefix_len``)."""
        node, path, host_only = self.root, [], 0
        tick = next(self._ticks)
        for t in tokens:
            child = node.children.get(t)
            if child is None:
                break
            child.tick = tick
            path.append(child)
            host_only += child.slot < 0
            node = child
        return MatchResult(path, host_only)

    def lock(self, nodes: Sequence[TreeNode]) -> None:
        for n in nodes:
            n.lock += 1

    def unlock(self, nodes: Sequence[TreeNode]) -> None:
        for n in nodes:
            n.lock -= 1

    def load_back(self, nodes: Sequence[TreeNode], slots: torch.Tensor) -> None:
        """Host-only ``nodes`` (in path order) get device ``slots``; their KV is copied from the host."""
        assert self._restore is not None
        dev = [int(s) for s in slots.tolist()]
        self._restore([n.host for n in nodes], dev)
        for n, s in zip(nodes, dev):
            n.slot = s
        self.device_tokens += len(nodes)
        self.loaded_back_tokens += len(nodes)

    # -- insert -----------------------------------------------------------------------------------
    def insert(self, tokens: Sequence[int], slots: torch.Tensor) -> None:
        """A finished request's KV (token i in ``slots[i]``) joins the tree; slots it already holds are freed."""
        node = self.root
        dup: list[int] = []
        tick = next(self._ticks)
        for t, s in zip(tokens, slots.tolist()):
            child = node.children.get(t)
            if child is None:
                child = TreeNode(token=t, parent=node, slot=int(s))
                node.children[t] = child
                self.device_tokens += 1
            elif child.slot < 0:
                child.slot = int(s)
                self.device_tokens += 1
            elif child.slot != s:
                dup.append(int(s))
            child.tick = tick
            node = child
        if dup:
            self._free(torch.tensor(dup, dtype=torch.int64))

    # -- eviction ---------------------------------------------------------------------------------
    def _nodes(self) -> list[TreeNode]:
        out, stack = [], list(self.root.children.values())
        while stack:
            n = stack.pop()
            out.append(n)
            stack.extend(n.children.values())
        return out

    @staticmethod
    def _device_leaf(n: TreeNode) -> bool:
        return n.slot >= 0 and n.lock == 0 and all(c.slot < 0 for c in n.children.values())

    def evict(self, need: int) -> int:
        """Free at least ``need`` device slots if unlocked leaves allow; returns how many were freed."""
        heap = [(n.tick, id(n), n) for n in self._nodes() if self._device_leaf(n)]
        heapq.heapify(heap)
        freed: list[int] = []
        while heap and len(freed) < need:
            _, _, n = heapq.heappop(heap)
            if not self._device_leaf(n):
                continue
            freed.append(n.slot)
            self._offload(n)
            parent = n.parent
            if parent is not None and parent is not self.root and self._device_leaf(parent):
                heapq.heappush(heap, (parent.tick, id(parent), parent))
        if freed:
            self._free(torch.tensor(freed, dtype=torch.int64))
            self.device_tokens -= len(freed)
            self.evicted_tokens += len(freed)
        return len(freed)

    def _offload(self, n: TreeNode) -> None:
        """Device -> host (HiCache) or gone. The slot itself is returned by the caller."""
        if self.host is not None and self._backup is not None and n.host < 0 and self._host_room():
            n.host = self.host.alloc()
            self._backup([n.slot], [n.host])
        n.slot = -1
        if n.host < 0:
            self._drop(n)

    def _host_room(self) -> bool:
        assert self.host is not None
        if self.host.available():
            return True
        # Host full: drop its least recently used host-only leaf (nothing on the device below it).
        leaves = [n for n in self._nodes() if n.slot < 0 and n.host >= 0 and not n.children and n.lock == 0]
        if not leaves:
            return False
        self._drop(min(leaves, key=lambda n: n.tick))
        return bool(self.host.available())

    def _drop(self, n: TreeNode) -> None:
        if n.host >= 0 and self.host is not None:
            self.host.free(n.host)
            n.host = -1
        if n.children:  # keep the node as a path to host-only children; a subtree dies with its root
            for c in list(n.children.values()):
                if c.slot < 0:
                    self._drop(c)
            if n.children:
                return
        if n.parent is not None:
            n.parent.children.pop(n.token, None)

    def reset(self) -> None:
        """``/flush_cache``: every cached slot back to the allocator, the host tier emptied."""
        held = [n.slot for n in self._nodes() if n.slot >= 0]
        if held:
            self._free(torch.tensor(held, dtype=torch.int64))
        self.root = TreeNode(token=-1, parent=None)
        if self.host is not None:
            self.host.clear()
        self.device_tokens = 0
