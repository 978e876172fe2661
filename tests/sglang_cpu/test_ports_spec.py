"""The speculative-decoding ports (slot bookkeeping, tree build, greedy verify) against plain references.

Launched as SGLang's wrappers launch them (``srt/speculative/triton_ops/cache_locs.py``, ``eagle.py``,
``eagle_utils.py``); the tree ops as sgl_kernel's ops, with the semantics of SGLang's own triton rewrite
(0.5.15 ``srt/speculative/triton_ops/spec_tree.py``).
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

import torch

from tests.sglang_cpu.ports import launch, ports


def _table(seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 10_000, (6, 40), generator=torch.Generator().manual_seed(seed), dtype=torch.int32)


def test_assign_req_to_token_pool_and_assign_extend_cache_locs_are_inverse() -> None:
    table = _table()
    reqs = torch.tensor([5, 2, 0])
    start = torch.tensor([3, 10, 0])
    end = torch.tensor([5, 14, 1])
    locs = torch.arange(500, 507)
    launch("assign_req_to_token_pool")((3,), reqs, table, start, end, locs, table.shape[1], 4)
    assert table[5, 3:5].tolist() == [500, 501]
    assert table[2, 10:14].tolist() == [502, 503, 504, 505]
    assert table[0, 0:1].tolist() == [506]
    back = torch.full((7,), -1, dtype=torch.int64)
    launch("assign_extend_cache_locs")((3,), reqs, table, start, end, back, table.shape[1], 4)
    assert torch.equal(back, locs)


def test_assign_draft_cache_locs_contiguous() -> None:
    table = _table(1)
    out = torch.empty(2 * 3, dtype=torch.int64)
    launch("assign_draft_cache_locs_contiguous")((2,), torch.tensor([1, 4]), table, torch.tensor([7, 2]), out,
                                                 table.shape[1], 1, 3)  # fmt: skip
    assert out.tolist() == table[1, 7:10].tolist() + table[4, 2:5].tolist()


def test_fill_bonus_tokens_takes_each_last_accepted_token() -> None:
    accept_tokens = torch.tensor([[5, 6, 7], [8, 9, 10]])
    bonus = torch.empty(2, dtype=torch.int64)
    launch("fill_bonus_tokens")((2,), accept_tokens, torch.tensor([2, 3]), bonus, 3)
    assert bonus.tolist() == [6, 10]


def test_fill_accept_out_cache_loc_compacts_accepted_slots() -> None:
    accept_index = torch.tensor([0, 1, -1, 3, -1, 5])
    out_cache_loc = torch.arange(100, 106)
    dst = torch.full((4,), -1, dtype=torch.int64)
    launch("fill_accept_out_cache_loc")((6,), accept_index, out_cache_loc, dst, 8)
    assert dst.tolist() == [100, 101, 103, 105]


def test_get_target_cache_loc_keeps_accepted_and_lists_slots_to_free() -> None:
    verify = 4
    out_cache_loc = torch.arange(200, 208)  # two requests of 4 verify slots
    correct = torch.tensor([1, 3])
    to_free = torch.tensor([2, 0])
    tgt = torch.full((6,), -1, dtype=torch.int64)
    freed = torch.full((2,), -1, dtype=torch.int64)
    launch("get_target_cache_loc")((2,), tgt, freed, correct, to_free, out_cache_loc, verify, 4, 2)
    assert tgt.tolist() == [200, 201, 204, 205, 206, 207]
    assert freed.tolist() == [202, 203]


def test_filter_finished_cache_loc_drops_finished_requests() -> None:
    tgt = torch.tensor([10, 11, 20, 21, 22, 30])
    correct = torch.tensor([1, 2, 0])  # request b holds correct[b] + 1 slots in tgt
    keep = torch.tensor([2, 0, 1])
    out = torch.full((3,), -1, dtype=torch.int64)
    launch("filter_finished_cache_loc_kernel")((3,), out, tgt, correct, keep, 4, 4)
    assert out.tolist() == [10, 11, 30]


def test_align_evict_mask_to_page_size() -> None:
    mask = torch.tensor([[True, True, True, True], [False, True, True, True]])
    launch("align_evict_mask_to_page_size")((2,), torch.tensor([6, 9]), mask, 4, 4, BLOCK_SIZE=4)
    # request 0: no kept draft -> start = (6+0-1)//4*4 - 6 = -2: slots 0..1 kept; request 1: (9+1-1)//4*4-9 = -1
    assert mask.tolist() == [[False, False, True, True], [False, False, False, True]]


def test_generate_draft_decode_kv_indices_topk1() -> None:
    table = _table(2)
    steps, seqs = 2, 2
    lens = torch.tensor([5, 3])
    stride = int(lens.sum()) + seqs * steps
    kv_indices = torch.full((steps * stride,), -1, dtype=torch.int64)
    kv_indptr = torch.zeros((steps, seqs + 1), dtype=torch.int32)
    launch("generate_draft_decode_kv_indices")((steps, seqs, 1), torch.tensor([3, 1]), table, lens, kv_indices,
                                               kv_indptr, lens, table.shape[1], stride, seqs + 1, 2, 2, 2, 1)
    for step in range(steps):
        iters = step + 1
        got = kv_indices[step * stride:]
        first = table[3, :5].tolist() + table[3, 5:5 + iters].tolist()
        second = table[1, :3].tolist() + table[1, 3:3 + iters].tolist()
        assert got[:len(first) + len(second)].tolist() == first + second
        assert kv_indptr[step].tolist() == [0, 5 + iters, 8 + 2 * iters]


def _chain(bs: int, draft: int, seq_lens: list[int]) -> dict[str, torch.Tensor]:
    """build_tree's inputs for topk 1 and draft - 1 steps, as organize_draft_results makes them (spec_utils.py:205-259):
    step 0's parents are [-1, 0], step i's are [i]; the last step's are dropped; all draft - 1 scores are selected."""
    steps = draft - 1
    parents = torch.arange(-1, steps - 1) if steps > 1 else torch.empty(0, dtype=torch.long)
    return {"parent_list": parents.repeat(bs, 1), "selected_index": torch.arange(steps).repeat(bs, 1),
            "seq_lens": torch.tensor(seq_lens)}


@pytest.mark.parametrize("draft", [2, 4])
def test_build_tree_topk1_is_a_causal_chain(draft: int) -> None:
    """topk 1: token i's parent is token i-1, positions seq_len + i, each row sees the prefix and tokens <= i."""
    seq_lens = [5, 2]
    bs = len(seq_lens)
    chain = _chain(bs, draft, seq_lens)
    mask = torch.full((sum(seq_lens) * draft + draft * draft * bs,), True)
    positions = torch.empty(bs * draft, dtype=torch.long)
    retrieve = torch.full((3, bs, draft), -1, dtype=torch.long)
    ports().REGISTRY["sgl_kernel.build_tree_kernel_efficient"](
        chain["parent_list"], chain["selected_index"], chain["seq_lens"], mask, positions, retrieve[0], retrieve[1],
        retrieve[2], 1, draft - 1, draft, 0)
    offset = 0
    for b, seq_len in enumerate(seq_lens):
        rows = mask[offset:offset + draft * (seq_len + draft)].view(draft, seq_len + draft)
        expected = torch.ones(draft, seq_len + draft, dtype=torch.bool)
        expected[:, seq_len:] = torch.tril(torch.ones(draft, draft, dtype=torch.bool))
        assert torch.equal(rows, expected)
        assert positions[b * draft:(b + 1) * draft].tolist() == [seq_len + i for i in range(draft)]
        assert retrieve[0, b].tolist() == [b * draft + i for i in range(draft)]
        assert retrieve[1, b].tolist() == list(range(1, draft)) + [-1]
        assert retrieve[2, b].tolist() == [-1] * draft
        offset += draft * (seq_len + draft)


def test_build_tree_topk2_links_siblings() -> None:
    """topk 2, one step, 3 draft tokens: both candidates are children of the root, linked as siblings."""
    mask = torch.full((4 * 3 + 9,), True)
    positions = torch.empty(3, dtype=torch.long)
    retrieve = torch.full((3, 1, 3), -1, dtype=torch.long)
    ports().REGISTRY["sgl_kernel.build_tree_kernel_efficient"](
        torch.empty(1, 0, dtype=torch.long), torch.tensor([[0, 1]]), torch.tensor([4]), mask, positions, retrieve[0],
        retrieve[1], retrieve[2], 2, 1, 3, 0)
    assert retrieve[1, 0].tolist() == [1, -1, -1]  # the root's first child is token 1 ...
    assert retrieve[2, 0].tolist() == [-1, 2, -1]  # ... whose sibling is token 2
    assert positions.tolist() == [4, 5, 5]
    rows = mask.view(3, 7)
    assert rows[:, 4:].tolist() == [[True, False, False], [True, True, False], [True, False, True]]


def _verify(candidates: torch.Tensor, target: torch.Tensor, next_token: torch.Tensor, next_sibling: torch.Tensor,
            num_spec: int) -> tuple[list[int], list[list[int]], list[int]]:
    bs, draft = candidates.shape
    predicts = torch.full((bs * draft,), -7, dtype=torch.long)
    accept_index = torch.full((bs, num_spec), -1, dtype=torch.long)
    accept_num = torch.full((bs,), -1, dtype=torch.long)
    retrieve_index = torch.arange(bs * draft).view(bs, draft)
    ports().REGISTRY["sgl_kernel.verify_tree_greedy"](
        predicts=predicts, accept_index=accept_index, accept_token_num=accept_num, candidates=candidates,
        retrive_index=retrieve_index, retrive_next_token=next_token, retrive_next_sibling=next_sibling,
        target_predict=target)
    return predicts.tolist(), accept_index.tolist(), accept_num.tolist()


def test_verify_tree_greedy_chain_accepts_the_matching_prefix() -> None:
    candidates = torch.tensor([[9, 4, 6, 8], [9, 3, 3, 3]])  # position 0 is the bonus token (never compared)
    target = torch.tensor([[4, 6, 1, 2], [5, 5, 5, 5]])  # request 0 accepts 4, 6 then misses 8 (target 1)
    chain_next = torch.tensor([[1, 2, 3, -1], [1, 2, 3, -1]])
    predicts, accept_index, accept_num = _verify(candidates, target, chain_next, torch.full((2, 4), -1), 4)
    assert accept_num == [2, 0]
    assert accept_index == [[0, 1, 2, -1], [4, -1, -1, -1]]
    assert predicts[:4] == [4, 6, 1, -7] and predicts[4:] == [5, -7, -7, -7]


def test_verify_tree_greedy_follows_the_matching_sibling() -> None:
    candidates = torch.tensor([[0, 7, 8]])
    target = torch.tensor([[8, 3, 5]])  # the root predicts 8: sibling token 2 matches, then its prediction is 5
    predicts, accept_index, accept_num = _verify(candidates, target, torch.tensor([[1, -1, -1]]),
                                                 torch.tensor([[-1, 2, -1]]), 2)  # fmt: skip
    assert accept_num == [1]
    assert accept_index == [[0, 2]]
    assert predicts == [8, -7, 5]
