"""The KV-slot, position, cache-copy and softcap ports against straightforward references on random inputs.

Each port is launched as SGLang launches its triton kernel (grid and arguments of the wrapper named in each test)
and compared with the kernel's documented effect written as plain indexing.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

import torch

from tests.sglang_cpu.ports import launch


def _pool(reqs: int = 5, width: int = 64, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 10_000, (reqs, width), generator=torch.Generator().manual_seed(seed), dtype=torch.int32)


def test_write_req_to_token_pool_prefix_pointers_and_extend_slots() -> None:
    """mem_cache/common.py:129-145: prefixes given as a table of data_ptr()s, extend slots from out_cache_loc."""
    table = _pool()
    before = table.clone()
    prefixes = [torch.tensor([11, 12, 13], dtype=torch.int64), torch.tensor([], dtype=torch.int64),
                torch.tensor([21, 22, 23, 24, 25], dtype=torch.int64)]  # fmt: skip
    reqs = torch.tensor([3, 0, 4])
    pre = torch.tensor([3, 0, 5])
    extend = torch.tensor([2, 4, 1])
    seq = pre + extend
    out_cache_loc = torch.arange(100, 107)
    pointers = torch.tensor([t.data_ptr() for t in prefixes], dtype=torch.uint64)
    launch("write_req_to_token_pool_triton")((3,), table, reqs, pointers, pre, seq, extend, out_cache_loc, table.shape[1])
    expected = before.clone()
    cum = 0
    for i, req in enumerate(reqs.tolist()):
        expected[req, :int(pre[i])] = prefixes[i].to(torch.int32)
        expected[req, int(pre[i]):int(seq[i])] = out_cache_loc[cum:cum + int(extend[i])].to(torch.int32)
        cum += int(extend[i])
    assert torch.equal(table, expected)


@pytest.mark.parametrize("with_start", [False, True])
def test_create_kv_indices_reads_each_request_row(with_start: bool) -> None:
    """attention/triton_ops/kv_indices.py:8-43, launched by triton_backend.py (and with kv_start_idx by the window)."""
    table = _pool(seed=1)
    reqs = torch.tensor([4, 1])
    lens = torch.tensor([7, 12])
    starts = torch.tensor([3, 20]) if with_start else None
    indptr = torch.tensor([0, 7, 19], dtype=torch.int32)
    out = torch.full((19,), -5, dtype=torch.int64)
    launch("create_flashinfer_kv_indices_triton")((2,), table, reqs, lens, indptr, starts, out, table.stride(0))
    s = starts.tolist() if starts is not None else [0, 0]
    expected = torch.cat([table[4, s[0]:s[0] + 7], table[1, s[1]:s[1] + 12]]).to(torch.int64)
    assert torch.equal(out, expected)


@pytest.mark.parametrize("has_prefix", [True, False])
def test_compute_position(has_prefix: bool) -> None:
    prefix = torch.tensor([5, 0, 9]) if has_prefix else torch.empty(0, dtype=torch.int64)
    seq = torch.tensor([3, 4, 2])
    positions = torch.full((9,), -1, dtype=torch.int64)
    starts = torch.full((3,), -1, dtype=torch.int32)
    launch("compute_position_kernel")((3,), positions, starts, prefix, seq, has_prefix)
    p = prefix.tolist() if has_prefix else [0, 0, 0]
    expected = torch.cat([torch.arange(p[i], p[i] + int(seq[i])) for i in range(3)])
    assert torch.equal(positions, expected)
    assert starts.tolist() == [0, 3, 7]


def test_last_loc_and_its_int32_variant() -> None:
    table = _pool(seed=2)
    reqs = torch.tensor([2, 0, 3])
    prefix = torch.tensor([4, 0, 10])
    result = torch.empty(3, dtype=torch.int64)
    launch("get_last_loc_kernel")((1,), table, reqs, prefix, result, 3, table.stride(0), BLOCK_SIZE=256)
    assert result.tolist() == [int(table[2, 3]), -1, int(table[3, 9])]
    result32 = torch.empty(3, dtype=torch.int32)
    launch("_get_last_loc_safe_kernel")((1,), table, reqs, prefix, result32, 3, table.stride(0), BLOCK_SIZE=256,
                                        PREFIX_DTYPE_IS_I64=True)
    assert result32.tolist() == result.tolist()


def test_copy_all_layer_kv_cache_moves_rows_of_every_buffer_in_place() -> None:
    """mem_cache/memory_pool.py:1198-1210 launches it over the pool's raw buffer addresses and row strides (bytes)."""
    gen = torch.Generator().manual_seed(3)
    buffers = [torch.randn(10, 2, 8, generator=gen).to(torch.bfloat16), torch.randn(10, 2, 8, generator=gen)]
    before = [b.clone() for b in buffers]
    ptrs = torch.tensor([b.data_ptr() for b in buffers], dtype=torch.uint64)
    strides = torch.tensor([b[0].numel() * b.element_size() for b in buffers])
    src = torch.tensor([1, 2, 3])
    tgt = torch.tensor([2, 3, 7])  # overlapping source and target rows: the copy reads before it writes
    launch("copy_all_layer_kv_cache_tiled")((2, 1), ptrs, strides, tgt, src, 3, 128, BYTES_PER_TILE=512)
    for b, old in zip(buffers, before, strict=True):
        expected = old.clone()
        expected[tgt] = old[src]
        assert torch.equal(b, expected)


def test_softcap_in_place_contiguous_and_row_strided() -> None:
    """layers/triton_ops/softcap.py:94-116: one row of numel() when contiguous, else rows of row_stride."""
    gen = torch.Generator().manual_seed(4)
    logits = torch.randn(3, 50, generator=gen) * 40
    expected = 30.0 * torch.tanh(logits / 30.0)
    launch("softcap_inplace_logits_kernel")((1, 1), full_logits_ptr=logits, softcapping_value=30.0, ncols=150,
                                            row_stride=150, BLOCK_SIZE=1024)
    torch.testing.assert_close(logits, expected)
    wide = torch.randn(3, 80, generator=gen) * 40
    view = wide[:, :50]
    untouched = wide[:, 50:].clone()
    expected = 30.0 * torch.tanh(view / 30.0)
    launch("softcap_inplace_logits_kernel")((1, 3), full_logits_ptr=view, softcapping_value=30.0, ncols=50,
                                            row_stride=80, BLOCK_SIZE=1024)
    torch.testing.assert_close(view, expected)
    assert torch.equal(wide[:, 50:], untouched)
    out = torch.empty(3, 80)
    launch("softcap_out_kernel")((2,), out, wide, 240, 10.0, BLOCK_SIZE=128)
    torch.testing.assert_close(out, 10.0 * torch.tanh(wide / 10.0))
