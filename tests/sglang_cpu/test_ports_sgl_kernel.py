"""The ``sgl_kernel`` CPU-op ports (``sgl_kernel_*.py``) held to their references on random inputs.

Each op is checked against an independent statement of what it must do: a loop over SGLang's triton kernel's
programs, or the port of the same triton kernel (``triton.<name>``, written apart from the CPU op), or, for
attention, dense masked attention built from scratch (``scaled_dot_product_attention`` where it applies).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("torch")

import torch
import torch.nn.functional as F

from tests.sglang_cpu.ports import launch, ports


def _op(name: str) -> Callable[..., Any]:
    return ports().REGISTRY[f"sgl_kernel.{name}"]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("seed", range(5))
def test_copy_all_layer_kv_cache_copies_rows_of_every_buffer_read_before_written(seed: int) -> None:
    g = _gen(seed)
    buffers = [torch.randn(64, 4, 8, generator=g).to(torch.float16) for _ in range(3)] + [torch.randn(64, 2, 16, generator=g)]
    expected = [b.clone() for b in buffers]
    n = 10
    src = torch.randperm(64, generator=g)[:n]
    tgt = torch.cat([src[: n // 2], torch.randperm(64, generator=g)[: n - n // 2]])  # overlaps the sources
    for b in expected:
        b[tgt] = b[src].clone()
    ptrs = torch.tensor([b.data_ptr() for b in buffers], dtype=torch.int64)
    strides = torch.tensor([b[0].numel() * b.element_size() for b in buffers], dtype=torch.int64)
    _op("copy_all_layer_kv_cache_cpu")(ptrs, strides, tgt, src)
    for got, want in zip(buffers, expected, strict=True):
        assert torch.equal(got, want)


def _slots_case(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    g = _gen(seed)
    table = torch.randint(0, 5000, (8, 64), generator=g, dtype=torch.int64)
    reqs = torch.randperm(8, generator=g)[:4]
    start = torch.randint(0, 30, (4,), generator=g)
    end = start + torch.randint(0, 20, (4,), generator=g)
    locs = torch.randint(0, 5000, (int((end - start).sum()),), generator=g)
    return table, reqs, start, end, locs


def _triton_assign(table: torch.Tensor, reqs: torch.Tensor, start: torch.Tensor, end: torch.Tensor, locs: torch.Tensor,
                   ) -> None:
    """``assign_req_to_token_pool`` (0.5.21 ``srt/mem_cache/allocation.py:653``), one program per request."""
    for pid in range(reqs.numel()):
        out_offset = int((end[:pid] - start[:pid]).sum())
        kv_start, kv_end = int(start[pid]), int(end[pid])
        for k in range(kv_end - kv_start):
            table[int(reqs[pid]), kv_start + k] = locs[out_offset + k]


@pytest.mark.parametrize("seed", range(5))
def test_assign_req_to_token_pool_cpu_follows_the_triton_kernel(seed: int) -> None:
    table, reqs, start, end, locs = _slots_case(seed)
    want = table.clone()
    _triton_assign(want, reqs, start, end, locs)
    _op("assign_req_to_token_pool_cpu")(reqs, table, start, end, locs, table.shape[1])
    assert torch.equal(table, want)
    also = _slots_case(seed)[0]
    launch("assign_req_to_token_pool")((4,), reqs, also, start, end, locs, also.shape[1], 4)
    assert torch.equal(also, want), "the CPU op and the triton kernel's port agree"


@pytest.mark.parametrize("seed", range(5))
def test_assign_extend_cache_locs_cpu_reads_back_what_was_assigned(seed: int) -> None:
    table, reqs, start, end, locs = _slots_case(seed)
    _triton_assign(table, reqs, start, end, locs)
    out = torch.full_like(locs, -1)
    _op("assign_extend_cache_locs_cpu")(reqs, table, start, end, out, table.shape[1])
    assert torch.equal(out, locs)


@pytest.mark.parametrize(("topk", "steps"), [(1, 3), (2, 2), (4, 1)])
def test_assign_draft_cache_locs_contiguous_cpu_matches_the_triton_kernels_port(topk: int, steps: int) -> None:
    table, reqs, _, _, _ = _slots_case(topk * 10 + steps)
    seq_lens = torch.tensor([3, 17, 0, 30])
    mine = torch.empty(4 * topk * steps, dtype=torch.int64)
    theirs = torch.empty_like(mine)
    _op("assign_draft_cache_locs_contiguous_cpu")(reqs, table, seq_lens, mine, table.shape[1], topk, steps)
    launch("assign_draft_cache_locs_contiguous")((4,), reqs, table, seq_lens, theirs, table.shape[1], topk, steps)
    assert torch.equal(mine, theirs)
    for i in range(4):
        n = topk * steps
        assert mine[i * n:(i + 1) * n].tolist() == table[int(reqs[i]), int(seq_lens[i]):int(seq_lens[i]) + n].tolist()


@pytest.mark.parametrize("seed", range(5))
def test_fill_accept_out_cache_loc_cpu_packs_accepted_slots_in_order(seed: int) -> None:
    g = _gen(seed)
    accept_index = torch.randint(-1, 12, (3, 4), generator=g)
    out_cache_loc = torch.randint(0, 1000, (12,), generator=g)
    mine = torch.zeros(12, dtype=torch.int64)
    _op("fill_accept_out_cache_loc_cpu")(accept_index, out_cache_loc, mine)
    want = torch.zeros(12, dtype=torch.int64)
    flat = accept_index.reshape(-1)
    for pid in range(flat.numel()):  # the triton kernel's programs (kernels/ops/speculative/eagle.py:55)
        dst = int((flat[:pid] != -1).sum())
        if flat[pid] > -1:
            want[dst] = out_cache_loc[flat[pid]]
    assert torch.equal(mine, want)


def test_fill_bonus_tokens_cpu_takes_each_requests_last_accepted_token() -> None:
    tokens = torch.arange(100, 112).view(3, 4)
    lens = torch.tensor([1, 4, 2])
    bonus = torch.zeros(3, dtype=torch.int64)
    _op("fill_bonus_tokens_cpu")(tokens, lens, bonus, 4)
    assert bonus.tolist() == [100, 107, 109]
    theirs = torch.zeros(3, dtype=torch.int64)
    launch("fill_bonus_tokens")((3,), tokens, lens, theirs, 4)
    assert torch.equal(bonus, theirs)


@pytest.mark.parametrize(("topk", "steps"), [(1, 3), (2, 3), (3, 2)])
def test_build_draft_decode_metadata_cpu_lists_what_the_gpu_draft_reads(topk: int, steps: int) -> None:
    table, reqs, _, _, _ = _slots_case(topk + steps)
    seq_lens = torch.tensor([5, 12, 1, 20])
    draft_table = _op("build_draft_decode_metadata_cpu")(table, reqs, seq_lens, topk, steps, table.shape[1])
    # The GPU twin (generate_draft_decode_kv_indices, cache_locs.py:66): per step, each (request, candidate)'s kv
    # indices are its committed slots then its first step+1 draft slots.
    for step in range(steps):
        for b in range(4):
            for t in range(topk):
                seq_len, row = int(seq_lens[b]), int(reqs[b])
                drafts = table[row, seq_len + t * steps: seq_len + t * steps + step + 1]
                want = table[row, :seq_len].tolist() + drafts.tolist()
                assert draft_table[b * topk + t, : seq_len + step + 1].tolist() == want


def _random_tree(n: int, g: torch.Generator) -> list[int]:
    """parent[i] < i for i > 0; node 0 is the root (NGRAM's verified token)."""
    return [-1] + [int(torch.randint(0, i, (1,), generator=g)) for i in range(1, n)]


def _ancestor_mask(parents: list[int]) -> torch.Tensor:
    n = len(parents)
    mask = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        j = i
        while j != -1:
            mask[i, j] = True
            j = parents[j]
    return mask


@pytest.mark.parametrize("seed", range(8))
def test_reconstruct_indices_from_tree_mask_follows_the_contract(seed: int) -> None:
    g = _gen(seed)
    n, bs = 6, 3
    trees = [_random_tree(n, g) for _ in range(bs)]
    mask = torch.stack([_ancestor_mask(t) for t in trees]).reshape(-1)
    seq_lens = torch.tensor([7, 1, 30])
    positions, index, next_token, next_sibling = (torch.full((bs * n,), 99, dtype=torch.int64) for _ in range(4))
    _op("reconstruct_indices_from_tree_mask")(mask, seq_lens, positions, index, next_token, next_sibling, bs, n)
    for b, parents in enumerate(trees):
        for i in range(n):
            depth, j = 0, parents[i]
            while j != -1:
                depth, j = depth + 1, parents[j]
            children = [k for k in range(n) if parents[k] == i]
            siblings = [k for k in range(i + 1, n) if parents[i] >= 0 and parents[k] == parents[i]]
            assert positions[b * n + i] == depth + int(seq_lens[b])
            assert index[b * n + i] == b * n + i
            assert next_token[b * n + i] == (min(children) if children else -1)
            assert next_sibling[b * n + i] == (min(siblings) if siblings else -1)


def _dense_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, visible: torch.Tensor, scale: float,
                     ) -> torch.Tensor:
    """Reference: torch's own SDPA with a boolean mask, grouped-query heads expanded."""
    group = q.shape[1] // k.shape[1]
    qh = q.float().transpose(0, 1)
    kh = k.float().repeat_interleave(group, dim=1).transpose(0, 1)
    vh = v.float().repeat_interleave(group, dim=1).transpose(0, 1)
    return F.scaled_dot_product_attention(qh, kh, vh, attn_mask=visible, scale=scale).transpose(0, 1)


def _pool(g: torch.Generator, heads_kv: int = 2, dim: int = 16) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    k_buffer = torch.randn(256, heads_kv, dim, generator=g)
    v_buffer = torch.randn(256, heads_kv, dim, generator=g)
    table = torch.randperm(256, generator=g)[:200].view(4, 50)
    return k_buffer, v_buffer, table


@pytest.mark.parametrize("seed", range(4))
def test_extend_attention_cpu_prefix_and_causal_extend(seed: int) -> None:
    g = _gen(seed)
    k_buffer, v_buffer, table = _pool(g)
    reqs, seq_lens, ext = torch.tensor([2, 0, 3]), torch.tensor([9, 5, 20]), torch.tensor([4, 5, 1])
    starts = torch.cumsum(ext, 0) - ext
    total = int(ext.sum())
    q = torch.randn(total, 4, 16, generator=g)
    k_new, v_new = torch.randn(total, 2, 16, generator=g), torch.randn(total, 2, 16, generator=g)
    out = torch.zeros(total, 4, 16)
    _op("extend_attention_cpu")(q, k_new, v_new, out, k_buffer, v_buffer, 1.0, 1.0, table, reqs, seq_lens, ext, starts,
                                 int(ext.max()), 0.25, 0.0, False, 0, None, None, None, True)
    for i in range(3):
        n, e, s = int(seq_lens[i]), int(ext[i]), int(starts[i])
        slots = table[int(reqs[i]), :n]
        k = torch.cat([k_buffer[slots[: n - e]], k_new[s: s + e]])
        v = torch.cat([v_buffer[slots[: n - e]], v_new[s: s + e]])
        visible = torch.ones(e, n, dtype=torch.bool)
        visible[:, n - e:] = torch.ones(e, e, dtype=torch.bool).tril()
        torch.testing.assert_close(out[s: s + e], _dense_attention(q[s: s + e], k, v, visible, 0.25))


def test_extend_attention_cpu_tree_mask_window_cap_and_sinks() -> None:
    g = _gen(7)
    k_buffer, v_buffer, table = _pool(g)
    reqs, seq_lens, ext = torch.tensor([1, 3]), torch.tensor([12, 8]), torch.tensor([4, 4])
    starts = torch.tensor([0, 4])
    q = torch.randn(8, 4, 16, generator=g)
    tree = torch.stack([_ancestor_mask([-1, 0, 0, 1]), _ancestor_mask([-1, 0, 1, 2])])
    sinks = torch.randn(4, generator=g)
    out = torch.zeros(8, 4, 16)
    cap, window_plus_one, scale = 3.0, 7, 0.3
    _op("extend_attention_cpu")(q, None, None, out, k_buffer, v_buffer, 1.0, 1.0, table, reqs, seq_lens, ext, starts, 4,
                                 scale, cap, False, window_plus_one, None, sinks, tree.reshape(-1), True)
    for i in range(2):
        n, e, s = int(seq_lens[i]), int(ext[i]), int(starts[i])
        slots = table[int(reqs[i]), :n]
        k, v = k_buffer[slots], v_buffer[slots].float()
        visible = torch.ones(e, n, dtype=torch.bool)
        visible[:, n - e:] = tree[i]
        q_pos, k_pos = torch.arange(n - e, n), torch.arange(n)
        visible &= (q_pos[:, None] - k_pos[None, :]) < window_plus_one
        for h in range(4):  # written out: capped scores, then a softmax whose denominator holds the sink
            scores = (q[s: s + e, h].float() @ k[:, h // 2].float().T) * scale
            scores = cap * torch.tanh(scores / cap)
            weights = torch.exp(scores.masked_fill(~visible, float("-inf")))
            weights = weights / (weights.sum(dim=1, keepdim=True) + torch.exp(sinks[h]))
            torch.testing.assert_close(out[s: s + e, h], weights @ v[:, h // 2])


@pytest.mark.parametrize("seed", range(4))
def test_decode_attention_cpu_stores_the_new_token_then_attends(seed: int) -> None:
    g = _gen(seed)
    k_buffer, v_buffer, table = _pool(g)
    reqs, seq_lens = torch.tensor([3, 1, 0]), torch.tensor([10, 1, 33])
    loc = torch.stack([table[int(r), int(n) - 1] for r, n in zip(reqs, seq_lens, strict=True)])
    q = torch.randn(3, 4, 16, generator=g)
    key, value = torch.randn(3, 2, 16, generator=g), torch.randn(3, 2, 16, generator=g)
    out = torch.zeros(3, 4, 16)
    want_k, want_v = k_buffer.clone(), v_buffer.clone()
    want_k[loc], want_v[loc] = key, value
    _op("decode_attention_cpu")(q, k_buffer, v_buffer, 1.0, 1.0, out, key, value, loc, torch.empty(0), table, reqs,
                                 seq_lens, 0.25, 0.0, False, 0, None, None)
    assert torch.equal(k_buffer, want_k) and torch.equal(v_buffer, want_v)
    for i in range(3):
        slots = table[int(reqs[i]), : int(seq_lens[i])]
        visible = torch.ones(1, int(seq_lens[i]), dtype=torch.bool)
        torch.testing.assert_close(out[i: i + 1], _dense_attention(q[i: i + 1], want_k[slots], want_v[slots], visible, 0.25))


def _tree_case(seed: int, n: int = 7, bs: int = 3) -> tuple[list[list[int]], torch.Tensor, torch.Tensor]:
    g = _gen(seed)
    trees = [_random_tree(n, g) for _ in range(bs)]
    candidates = torch.randint(0, 4, (bs, n), generator=g)  # a small vocabulary: matches happen
    target = torch.randint(0, 4, (bs, n), generator=g)
    return trees, candidates, target


@pytest.mark.parametrize("seed", range(10))
def test_verify_tree_greedy_cpu_accepts_the_longest_matching_path(seed: int) -> None:
    trees, candidates, target = _tree_case(seed)
    bs, n = candidates.shape
    mask = torch.stack([_ancestor_mask(t) for t in trees]).reshape(-1)
    positions, index, next_token, next_sibling = (torch.full((bs * n,), -1, dtype=torch.int64) for _ in range(4))
    _op("reconstruct_indices_from_tree_mask")(mask, torch.zeros(bs, dtype=torch.int64), positions, index, next_token,
                                              next_sibling, bs, n)
    steps = 5
    predicts = torch.full((bs * n,), -7, dtype=torch.int64)
    accept_index = torch.full((bs, steps), -1, dtype=torch.int64)
    accept_num = torch.zeros(bs, dtype=torch.int64)
    _op("verify_tree_greedy_cpu")(predicts=predicts, accept_index=accept_index, accept_token_num=accept_num,
                                  candidates=candidates, retrive_index=index.view(bs, n),
                                  retrive_next_token=next_token.view(bs, n), retrive_next_sibling=next_sibling.view(bs, n),
                                  target_predict=target)
    for b, parents in enumerate(trees):
        path, node = [0], 0  # greedy walk: the first (lowest-numbered) child whose draft equals the target there
        while len(path) < steps:
            children = [k for k in range(n) if parents[k] == node and int(candidates[b, k]) == int(target[b, node])]
            if not children:
                break
            node = min(children)
            path.append(node)
        assert accept_num[b] == len(path) - 1
        assert accept_index[b, : len(path)].tolist() == [b * n + p for p in path]
        for p, nxt in zip(path, path[1:], strict=False):
            assert predicts[b * n + p] == candidates[b, nxt]
        assert predicts[b * n + path[-1]] == target[b, path[-1]], "the bonus token: the target's at the last node"
