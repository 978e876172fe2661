"""The attention ports against naive attention on random inputs (no server).

Each case launches the port exactly as SGLang's wrapper launches the triton kernel (the argument lists below are
those of 0.5.14 ``extend_attention_fwd``/``decode_attention_fwd`` and their 0.5.15 versions, with page strides and
``lse_extend``) and compares with a softmax written out per query: absolute positions, the same causal, sliding
window and custom masks, logit cap, sinks and k/v scales (prefix only, as the kernel applies them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

pytest.importorskip("torch")

import torch

from tests.sglang_cpu.ports import launch

H, KVH, D = 4, 2, 16


@dataclass
class Batch:
    """Random extend batch: prefixes in a KV pool at scattered slots, extend tokens contiguous."""

    q: torch.Tensor  # [total_extend, H, D]
    k: torch.Tensor  # [total_extend, KVH, D]
    v: torch.Tensor
    k_pool: torch.Tensor  # [slots, KVH, D]
    v_pool: torch.Tensor
    qo_indptr: torch.Tensor
    kv_indptr: torch.Tensor
    kv_indices: torch.Tensor
    prefix_lens: list[int]
    extend_lens: list[int]


def make_batch(prefix_lens: list[int], extend_lens: list[int], *, seed: int, dtype: torch.dtype = torch.float32) -> Batch:
    gen = torch.Generator().manual_seed(seed)
    total_prefix, total_extend = sum(prefix_lens), sum(extend_lens)
    slots = total_prefix + 7
    k_pool = torch.randn(slots, KVH, D, generator=gen).to(dtype)
    v_pool = torch.randn(slots, KVH, D, generator=gen).to(dtype)
    kv_indices = torch.randperm(slots, generator=gen)[:total_prefix].to(torch.int64)
    q = torch.randn(total_extend, H, D, generator=gen).to(dtype)
    k = torch.randn(total_extend, KVH, D, generator=gen).to(dtype)
    v = torch.randn(total_extend, KVH, D, generator=gen).to(dtype)
    qo = torch.tensor([0, *torch.tensor(extend_lens).cumsum(0).tolist()], dtype=torch.int64)
    kv = torch.tensor([0, *torch.tensor(prefix_lens).cumsum(0).tolist()], dtype=torch.int32)
    return Batch(q, k, v, k_pool, v_pool, qo, kv, kv_indices, prefix_lens, extend_lens)


def naive_extend(b: Batch, *, sm_scale: float, window: int = -1, logit_cap: float = 0.0, sinks: torch.Tensor | None = None,
                 k_scale: float = 1.0, v_scale: float = 1.0, custom: list[torch.Tensor] | None = None,
                 skip_prefix_custom: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Per query: softmax over the keys it may see (absolute positions), as float64. Returns (out, lse)."""
    outs, lses = [], []
    for s, (lp, le) in enumerate(zip(b.prefix_lens, b.extend_lens, strict=True)):
        locs = b.kv_indices[int(b.kv_indptr[s]):int(b.kv_indptr[s + 1])]
        qs = int(b.qo_indptr[s])
        keys = torch.cat([b.k_pool[locs].double() * 1.0, b.k[qs:qs + le].double()])
        vals = torch.cat([b.v_pool[locs].double() * v_scale, b.v[qs:qs + le].double()])
        key_scale = torch.cat([torch.full((lp,), k_scale), torch.ones(le)]).double()
        for i in range(le):
            qpos = lp + i
            allowed = torch.arange(lp + le) <= qpos
            if custom is not None:
                row = custom[s][i]
                allowed = row.clone() if not skip_prefix_custom else torch.cat([torch.ones(lp, dtype=torch.bool), row[lp:]])
            if window > 0:
                allowed &= qpos <= torch.arange(lp + le) + window
            for h in range(H):
                score = (keys[:, h // (H // KVH)] @ b.q[qs + i, h].double()) * sm_scale * key_scale
                if logit_cap > 0:
                    score = logit_cap * torch.tanh(score / logit_cap)
                score = score.masked_fill(~allowed, float("-inf"))
                top = score.max()
                weights = torch.exp(score - top)
                denominator = weights.sum() + (torch.exp(sinks[h].double() - top) if sinks is not None else 0.0)
                outs.append((weights @ vals[:, h // (H // KVH)]) / denominator)
                lses.append(torch.log(denominator) + top)
    out = torch.stack(outs).view(sum(b.extend_lens), H, D)
    return out, torch.stack(lses).view(sum(b.extend_lens), H)


def launch_extend_014(b: Batch, o: torch.Tensor, *, sm_scale: float, window: int = -1, logit_cap: float = 0.0,
                      sinks: torch.Tensor | None = None, k_scale: float = 1.0, v_scale: float = 1.0,
                      custom_mask: torch.Tensor | None = None, mask_indptr: torch.Tensor | None = None,
                      window_kv_offsets: torch.Tensor | None = None, skip_prefix_custom_mask: bool = True,
                      block_m: int = 64) -> None:
    """0.5.14 ``extend_attention_fwd`` (extend_attention.py:571): the grid and arguments it launches with."""
    grid = (len(b.extend_lens), H, math.ceil(max(b.extend_lens) / block_m))
    launch("_fwd_kernel")(
        grid, b.q, b.k, b.v, o, b.k_pool, b.v_pool, b.qo_indptr, b.kv_indptr, b.kv_indices, custom_mask, mask_indptr,
        sinks, window_kv_offsets, sm_scale, k_scale, v_scale, H // KVH, b.q.stride(0), b.q.stride(1), b.k.stride(0),
        b.k.stride(1), b.v.stride(0), b.v.stride(1), o.stride(0), o.stride(1), b.k_pool.stride(0), b.k_pool.stride(1),
        b.v_pool.stride(0), b.v_pool.stride(1), SLIDING_WINDOW_SIZE=window, logit_cap=logit_cap, xai_temperature_len=-1,
        BLOCK_DMODEL=D, BLOCK_DPE=0, BLOCK_DV=D, BLOCK_M=block_m, BLOCK_N=64, Lq=D, Lv=D,
        USE_CUSTOM_MASK=custom_mask is not None, IS_CAUSAL=True, SKIP_PREFIX_CUSTOM_MASK=skip_prefix_custom_mask,
        HAS_SINK=sinks is not None, STORE_TRANSPOSE=False, num_warps=4, num_stages=1)


def launch_extend_015(b: Batch, o: torch.Tensor, lse: torch.Tensor | None, *, sm_scale: float, page_size: int = 1,
                      skip_prefix: bool = False, skip_extend: bool = False, window: int = -1) -> None:
    """0.5.15 ``extend_attention_fwd`` (extend_attention.py:622) with a 4-D paged pool when page_size > 1."""
    k_pool, v_pool = b.k_pool, b.v_pool
    if page_size > 1:
        pad = (-k_pool.shape[0]) % page_size
        k_pool = torch.cat([k_pool, torch.zeros(pad, KVH, D)]).view(-1, page_size, KVH, D)
        v_pool = torch.cat([v_pool, torch.zeros(pad, KVH, D)]).view(-1, page_size, KVH, D)
        kpage, ktok, kh = k_pool.stride(0), k_pool.stride(1), k_pool.stride(2)
        vpage, vtok, vh = v_pool.stride(0), v_pool.stride(1), v_pool.stride(2)
        kslot, vslot = kpage // page_size, vpage // page_size
    else:
        kslot, kh, vslot, vh = k_pool.stride(0), k_pool.stride(1), v_pool.stride(0), v_pool.stride(1)
        kpage, ktok, vpage, vtok = kslot, kslot, vslot, vslot
    grid = (len(b.extend_lens), H, math.ceil(max(b.extend_lens) / 64))
    launch("_fwd_kernel")(
        grid, b.q, b.k, b.v, o, lse, k_pool, v_pool, b.qo_indptr, b.kv_indptr, b.kv_indices, None, None, None, None,
        1.0 if sm_scale is None else sm_scale, 1.0, 1.0, H // KVH, b.q.stride(0), b.q.stride(1), b.k.stride(0),
        b.k.stride(1), b.v.stride(0), b.v.stride(1), o.stride(0), o.stride(1),
        lse.stride(0) if lse is not None else 0, lse.stride(1) if lse is not None else 0,
        kslot, kh, vslot, vh, kpage, ktok, vpage, vtok, SLIDING_WINDOW_SIZE=window, logit_cap=0.0,
        xai_temperature_len=-1, BLOCK_DMODEL=D, BLOCK_DPE=0, BLOCK_DV=D, BLOCK_M=64, BLOCK_N=64, Lq=D, Lv=D,
        USE_CUSTOM_MASK=False, IS_CAUSAL=True, SKIP_PREFIX_CUSTOM_MASK=True, STORE_LSE=lse is not None,
        SKIP_PREFIX=skip_prefix, SKIP_EXTEND=skip_extend, HAS_SINK=False, STORE_TRANSPOSE=False, PAGE_SIZE=page_size,
        num_warps=4, num_stages=1)


SCALE = 1.0 / math.sqrt(D)


@pytest.mark.parametrize(("prefix_lens", "extend_lens"), [([0], [9]), ([5, 0, 13], [3, 7, 1]), ([70], [80])])
def test_extend_causal_prefix_and_extend(prefix_lens: list[int], extend_lens: list[int]) -> None:
    b = make_batch(prefix_lens, extend_lens, seed=1)
    o = torch.zeros_like(b.q)
    launch_extend_014(b, o, sm_scale=SCALE)
    expected, _ = naive_extend(b, sm_scale=SCALE)
    torch.testing.assert_close(o.double(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("window", [1, 4, 40])
def test_extend_sliding_window_over_prefix_and_extend(window: int) -> None:
    b = make_batch([30, 3], [25, 9], seed=2)
    o = torch.zeros_like(b.q)
    launch_extend_014(b, o, sm_scale=SCALE, window=window)
    expected, _ = naive_extend(b, sm_scale=SCALE, window=window)
    torch.testing.assert_close(o.double(), expected, rtol=1e-5, atol=1e-5)


def test_extend_logit_cap_sinks_and_kv_scales() -> None:
    b = make_batch([12, 6], [5, 4], seed=3)
    sinks = torch.randn(H)
    o = torch.zeros_like(b.q)
    launch_extend_014(b, o, sm_scale=0.7, logit_cap=2.0, sinks=sinks, k_scale=1.5, v_scale=0.5)
    expected, _ = naive_extend(b, sm_scale=0.7, logit_cap=2.0, sinks=sinks, k_scale=1.5, v_scale=0.5)
    torch.testing.assert_close(o.double(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("skip_prefix_custom_mask", [True, False])
def test_extend_custom_mask_as_in_target_verify(skip_prefix_custom_mask: bool) -> None:
    """A random tree mask per sequence, flattened row by row over prefix + extend keys (mask_indptr)."""
    prefix_lens, extend_lens = [6, 11], [4, 4]
    b = make_batch(prefix_lens, extend_lens, seed=4)
    gen = torch.Generator().manual_seed(5)
    masks = []
    for lp, le in zip(prefix_lens, extend_lens, strict=True):
        m = torch.rand(le, lp + le, generator=gen) < 0.6
        m[torch.arange(le), lp + torch.arange(le)] = True  # each token sees itself, as a tree mask does
        masks.append(m)
    flat = torch.cat([m.reshape(-1) for m in masks])
    mask_indptr = torch.tensor([0, *torch.tensor([m.numel() for m in masks]).cumsum(0).tolist()])
    o = torch.zeros_like(b.q)
    launch_extend_014(b, o, sm_scale=SCALE, custom_mask=flat, mask_indptr=mask_indptr,
                      skip_prefix_custom_mask=skip_prefix_custom_mask)
    expected, _ = naive_extend(b, sm_scale=SCALE, custom=masks, skip_prefix_custom=skip_prefix_custom_mask)
    torch.testing.assert_close(o.double(), expected, rtol=1e-5, atol=1e-5)


def test_extend_custom_mask_with_sliding_window_offset() -> None:
    """Target verify on a sliding-window layer: kv_indptr covers only the window, the mask rows the whole sequence.

    The backend passes the window's prefix (``window_kv_indptr``) and each sequence's ``window_kv_offsets`` (the
    prefix tokens left of the window), and the kernel skips that many columns of each mask row.
    """
    full_prefix, le, window = 20, 3, 8
    full = make_batch([full_prefix], [le], seed=6)
    offset = full_prefix - window  # update_sliding_window_buffer keeps min(prefix, window) tokens
    kept = make_batch([window], [le], seed=6)
    kept.k_pool, kept.v_pool = full.k_pool, full.v_pool
    kept.q, kept.k, kept.v = full.q, full.k, full.v
    kept.kv_indices = full.kv_indices[offset:]
    gen = torch.Generator().manual_seed(7)
    mask = torch.rand(le, full_prefix + le, generator=gen) < 0.7
    mask[torch.arange(le), full_prefix + torch.arange(le)] = True
    o = torch.zeros_like(full.q)
    launch_extend_014(kept, o, sm_scale=SCALE, window=window, custom_mask=mask.reshape(-1),
                      mask_indptr=torch.tensor([0, mask.numel()]), window_kv_offsets=torch.tensor([offset]),
                      skip_prefix_custom_mask=False)
    expected, _ = naive_extend(full, sm_scale=SCALE, window=window, custom=[mask], skip_prefix_custom=False)
    torch.testing.assert_close(o.double(), expected, rtol=1e-5, atol=1e-5)


def test_extend_rows_past_the_grid_are_not_written() -> None:
    """The kernel covers cdiv(max_len_extend, BLOCK_M) row blocks; a shorter max leaves later rows as they were."""
    b = make_batch([4], [10], seed=8)
    o = torch.full_like(b.q, 123.0)
    grid = (1, H, 1)  # max_len_extend 4 with BLOCK_M 4: one block of 4 rows
    launch("_fwd_kernel")(
        grid, b.q, b.k, b.v, o, b.k_pool, b.v_pool, b.qo_indptr, b.kv_indptr, b.kv_indices, None, None, None, None,
        SCALE, 1.0, 1.0, H // KVH, b.q.stride(0), b.q.stride(1), b.k.stride(0), b.k.stride(1), b.v.stride(0),
        b.v.stride(1), o.stride(0), o.stride(1), b.k_pool.stride(0), b.k_pool.stride(1), b.v_pool.stride(0),
        b.v_pool.stride(1), SLIDING_WINDOW_SIZE=-1, logit_cap=0.0, xai_temperature_len=-1, BLOCK_DMODEL=D, BLOCK_DPE=0,
        BLOCK_DV=D, BLOCK_M=4, BLOCK_N=64, Lq=D, Lv=D, USE_CUSTOM_MASK=False, IS_CAUSAL=True,
        SKIP_PREFIX_CUSTOM_MASK=True, HAS_SINK=False, STORE_TRANSPOSE=False)
    expected, _ = naive_extend(b, sm_scale=SCALE)
    torch.testing.assert_close(o[:4].double(), expected[:4], rtol=1e-5, atol=1e-5)
    assert bool((o[4:] == 123.0).all())


@pytest.mark.parametrize("page_size", [1, 4])
def test_extend_015_lse_and_paged_pool(page_size: int) -> None:
    b = make_batch([9, 14], [6, 5], seed=9)
    o = torch.zeros_like(b.q)
    lse = torch.zeros(b.q.shape[0], H)
    launch_extend_015(b, o, lse, sm_scale=SCALE, page_size=page_size, window=7)
    expected, expected_lse = naive_extend(b, sm_scale=SCALE, window=7)
    torch.testing.assert_close(o.double(), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lse.double(), expected_lse, rtol=1e-5, atol=1e-5)


def test_extend_015_prefix_and_extend_parts_merge_to_the_whole() -> None:
    """skip_extend gives attention over the prefix alone, skip_prefix over the extend alone; merged by LSE they equal
    the whole (what DCP does with them)."""
    b = make_batch([10, 7], [5, 6], seed=10)
    whole, parts = torch.zeros_like(b.q), [torch.zeros_like(b.q), torch.zeros_like(b.q)]
    lses = [torch.zeros(b.q.shape[0], H), torch.zeros(b.q.shape[0], H)]
    launch_extend_015(b, whole, None, sm_scale=SCALE)
    launch_extend_015(b, parts[0], lses[0], sm_scale=SCALE, skip_extend=True)
    launch_extend_015(b, parts[1], lses[1], sm_scale=SCALE, skip_prefix=True)
    top = torch.maximum(lses[0], lses[1])
    w0, w1 = torch.exp(lses[0] - top), torch.exp(lses[1] - top)
    merged = (parts[0] * w0[..., None] + parts[1] * w1[..., None]) / (w0 + w1)[..., None]
    torch.testing.assert_close(merged, whole, rtol=1e-5, atol=1e-5)


def test_extend_bf16_pool_close_to_float64() -> None:
    b = make_batch([40], [20], seed=11, dtype=torch.bfloat16)
    o = torch.zeros_like(b.q)
    launch_extend_014(b, o, sm_scale=SCALE, window=16)
    expected, _ = naive_extend(b, sm_scale=SCALE, window=16)
    torch.testing.assert_close(o.double(), expected, rtol=2e-2, atol=2e-2)


# --- decode -------------------------------------------------------------------------------------------------


def naive_decode(q: torch.Tensor, k_pool: torch.Tensor, v_pool: torch.Tensor, kv_indptr: torch.Tensor,
                 kv_indices: torch.Tensor, *, sm_scale: float, logit_cap: float = 0.0, sinks: torch.Tensor | None = None,
                 v_scale: float = 1.0) -> torch.Tensor:
    heads, kv_heads = q.shape[1], k_pool.shape[1]
    out = torch.zeros(q.shape[0], heads, v_pool.shape[-1], dtype=torch.float64)
    for b in range(q.shape[0]):
        locs = kv_indices[int(kv_indptr[b]):int(kv_indptr[b + 1])]
        for h in range(heads):
            kh = h // (heads // kv_heads)
            score = (k_pool[locs, kh].double() @ q[b, h].double()) * sm_scale
            if logit_cap > 0:
                score = logit_cap * torch.tanh(score / logit_cap)
            top = score.max()
            weights = torch.exp(score - top)
            denominator = weights.sum() + (torch.exp(sinks[h].double() - top) if sinks is not None else 0.0)
            out[b, h] = (weights @ v_pool[locs, kh].double()) / denominator * v_scale
    return out


def launch_decode_014(q: torch.Tensor, k_pool: torch.Tensor, v_pool: torch.Tensor, o: torch.Tensor,
                      kv_indptr: torch.Tensor, kv_indices: torch.Tensor, num_kv_splits: torch.Tensor, max_kv_splits: int,
                      *, sm_scale: float, logit_cap: float = 0.0, sinks: torch.Tensor | None = None,
                      v_scale: float = 1.0) -> None:
    """0.5.14 ``decode_attention_fwd`` (decode_attention.py:745): stage 1 (MHA or grouped) then stage 2."""
    batch, heads = q.shape[0], q.shape[1]
    lk, lv = k_pool.shape[-1], v_pool.shape[-1]
    att_out = torch.empty(batch, heads, max_kv_splits, lv)
    att_lse = torch.empty(batch, heads, max_kv_splits)
    group = heads // k_pool.shape[1]
    common = (q, k_pool, v_pool, sm_scale, kv_indptr, kv_indices, att_out, att_lse, num_kv_splits, q.stride(0),
              q.stride(1), k_pool.stride(0), k_pool.stride(1), v_pool.stride(0), v_pool.stride(1), att_out.stride(0),
              att_out.stride(1), att_out.stride(2))  # fmt: skip
    if group == 1:
        launch("_fwd_kernel_stage1")((batch, heads, max_kv_splits), *common, kv_group_num=group, BLOCK_DMODEL=lk,
                                     BLOCK_DV=lv, BLOCK_N=64, MIN_BLOCK_KV=32, logit_cap=logit_cap,
                                     xai_temperature_len=-1, num_warps=4, num_stages=2, Lk=lk, Lv=lv)  # fmt: skip
    else:
        launch("_fwd_grouped_kernel_stage1")(
            (batch, math.ceil(heads / min(16, group)), max_kv_splits), *common, kv_group_num=group, q_head_num=heads,
            BLOCK_DMODEL=lk, BLOCK_DPE=0, BLOCK_DV=lv, BLOCK_N=32, BLOCK_H=16, MIN_BLOCK_KV=32, logit_cap=logit_cap,
            xai_temperature_len=-1, num_warps=4, num_stages=2, Lk=lk, Lv=lv, HAS_MLA=False, USE_PDL=False)
    launch("_fwd_kernel_stage2")(
        (batch, heads), att_out, att_lse, o, v_scale, kv_indptr, num_kv_splits, sinks, att_out.stride(0),
        att_out.stride(1), att_out.stride(2), o.stride(0), o.stride(1), MAX_KV_SPLITS=max_kv_splits, MIN_BLOCK_KV=32,
        BLOCK_DV=lv, Lv=lv, HAS_SINK=sinks is not None, USE_PDL=False, num_warps=4, num_stages=2)


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
@pytest.mark.parametrize("splits", [1, 3, 8])
def test_decode_split_kv_equals_naive(kv_heads: int, splits: int) -> None:
    gen = torch.Generator().manual_seed(20 + kv_heads + splits)
    lens = [1, 33, 100, 250]
    slots = sum(lens) + 5
    k_pool, v_pool = torch.randn(slots, kv_heads, D, generator=gen), torch.randn(slots, kv_heads, D, generator=gen)
    kv_indices = torch.randperm(slots, generator=gen)[:sum(lens)]
    kv_indptr = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
    q = torch.randn(len(lens), H, D, generator=gen)
    o = torch.zeros(len(lens), H, D)
    num_kv_splits = torch.full((len(lens),), splits, dtype=torch.int32)
    launch_decode_014(q, k_pool, v_pool, o, kv_indptr, kv_indices, num_kv_splits, 8, sm_scale=SCALE)
    torch.testing.assert_close(o.double(), naive_decode(q, k_pool, v_pool, kv_indptr, kv_indices, sm_scale=SCALE),
                               rtol=1e-5, atol=1e-5)


def test_decode_logit_cap_sinks_and_v_scale() -> None:
    gen = torch.Generator().manual_seed(30)
    lens = [17, 64]
    k_pool, v_pool = torch.randn(90, KVH, D, generator=gen), torch.randn(90, KVH, D, generator=gen)
    kv_indices = torch.randperm(90, generator=gen)[:sum(lens)]
    kv_indptr = torch.tensor([0, 17, 81], dtype=torch.int32)
    q = torch.randn(2, H, D, generator=gen)
    sinks = torch.randn(H, generator=gen)
    o = torch.zeros(2, H, D)
    launch_decode_014(q, k_pool, v_pool, o, kv_indptr, kv_indices, torch.tensor([2, 4], dtype=torch.int32), 4,
                      sm_scale=0.6, logit_cap=3.0, sinks=sinks, v_scale=0.8)
    expected = naive_decode(q, k_pool, v_pool, kv_indptr, kv_indices, sm_scale=0.6, logit_cap=3.0, sinks=sinks, v_scale=0.8)
    torch.testing.assert_close(o.double(), expected, rtol=1e-5, atol=1e-5)


def test_decode_stage1_stores_each_split_and_its_lse() -> None:
    """Split s covers [s*L, (s+1)*L) with L = cdiv(cdiv(len, splits), 32) * 32; empty splits are left untouched."""
    gen = torch.Generator().manual_seed(31)
    seq_len, splits = 70, 3  # L = 32: splits [0,32), [32,64), [64,70)
    k_pool, v_pool = torch.randn(seq_len, KVH, D, generator=gen), torch.randn(seq_len, KVH, D, generator=gen)
    kv_indices = torch.arange(seq_len)
    q = torch.randn(1, H, D, generator=gen)
    att_out = torch.full((1, H, 4, D), 7.0)
    att_lse = torch.full((1, H, 4), 7.0)
    launch("_fwd_grouped_kernel_stage1")(
        (1, 2, 4), q, k_pool, v_pool, SCALE, torch.tensor([0, seq_len]), kv_indices, att_out, att_lse,
        torch.tensor([splits]), q.stride(0), q.stride(1), k_pool.stride(0), k_pool.stride(1), v_pool.stride(0),
        v_pool.stride(1), att_out.stride(0), att_out.stride(1), att_out.stride(2), kv_group_num=2, q_head_num=H,
        BLOCK_DMODEL=D, BLOCK_DPE=0, BLOCK_DV=D, BLOCK_N=32, BLOCK_H=16, MIN_BLOCK_KV=32, logit_cap=0.0,
        xai_temperature_len=-1, Lk=D, Lv=D)
    for s, (lo, hi) in enumerate([(0, 32), (32, 64), (64, 70)]):
        for h in range(H):
            score = (k_pool[lo:hi, h // 2] @ q[0, h]) * SCALE
            torch.testing.assert_close(att_lse[0, h, s], torch.logsumexp(score, 0), rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(att_out[0, h, s], torch.softmax(score, 0) @ v_pool[lo:hi, h // 2], rtol=1e-5, atol=1e-5)
    assert bool((att_out[0, :, 3] == 7.0).all()) and bool((att_lse[0, :, 3] == 7.0).all())


def test_decode_015_layout_with_page_strides() -> None:
    gen = torch.Generator().manual_seed(32)
    k_pool, v_pool = torch.randn(48, KVH, D, generator=gen), torch.randn(48, KVH, D, generator=gen)
    kv_indices = torch.randperm(48, generator=gen)[:40]
    kv_indptr = torch.tensor([0, 40], dtype=torch.int32)
    q = torch.randn(1, H, D, generator=gen)
    att_out, att_lse = torch.empty(1, H, 8, D), torch.empty(1, H, 8)
    page = 4
    paged_k, paged_v = k_pool.view(-1, page, KVH, D), v_pool.view(-1, page, KVH, D)
    launch("_fwd_grouped_kernel_stage1")(
        (1, 2, 8), q, paged_k, paged_v, SCALE, kv_indptr, kv_indices, att_out, att_lse, torch.tensor([5]),
        q.stride(0), q.stride(1), paged_k.stride(0) // page, paged_k.stride(2), paged_v.stride(0) // page,
        paged_v.stride(2), paged_k.stride(0), paged_k.stride(1), paged_v.stride(0), paged_v.stride(1),
        att_out.stride(0), att_out.stride(1), att_out.stride(2), kv_group_num=2, q_head_num=H, BLOCK_DMODEL=D,
        BLOCK_DPE=0, BLOCK_DV=D, BLOCK_N=32, BLOCK_H=16, MIN_BLOCK_KV=32, logit_cap=0.0, xai_temperature_len=-1, Lk=D,
        Lv=D, HAS_MLA=False, USE_PDL=False, PAGE_SIZE=page)
    o = torch.zeros(1, H, D)
    launch("_fwd_kernel_stage2")(
        (1, H), att_out, att_lse, o, 1.0, kv_indptr, torch.tensor([5]), None, att_out.stride(0), att_out.stride(1),
        att_out.stride(2), o.stride(0), o.stride(1), MAX_KV_SPLITS=8, MIN_BLOCK_KV=32, BLOCK_DV=D, Lv=D, HAS_SINK=False)
    torch.testing.assert_close(o.double(), naive_decode(q, k_pool, v_pool, kv_indptr, kv_indices, sm_scale=SCALE),
                               rtol=1e-5, atol=1e-5)


def test_a_launch_no_layout_fits_is_refused_naming_the_kernel() -> None:
    with pytest.raises(NotImplementedError, match="_fwd_kernel_stage2"):
        launch("_fwd_kernel_stage2")((1, 1), torch.zeros(1), MAX_KV_SPLITS=8)


def test_extend_016_layout_score_mod_hook() -> None:
    """0.5.16 appends SCORE_MOD/Aux0/aux0_* (kernels/ops/attention/extend_attention.py:299-303), passed as keywords:
    None computes as before; a score_mod (a @triton.jit function) is refused, naming it."""
    b = make_batch([6], [5], seed=12)
    o = torch.zeros_like(b.q)
    args = (b.q, b.k, b.v, o, None, b.k_pool, b.v_pool, b.qo_indptr, b.kv_indptr, b.kv_indices, None, None, None,
            None, SCALE, 1.0, 1.0, H // KVH, b.q.stride(0), b.q.stride(1), b.k.stride(0), b.k.stride(1), b.v.stride(0),
            b.v.stride(1), o.stride(0), o.stride(1), 0, 0, b.k_pool.stride(0), b.k_pool.stride(1), b.v_pool.stride(0),
            b.v_pool.stride(1), b.k_pool.stride(0), b.k_pool.stride(0), b.v_pool.stride(0), b.v_pool.stride(0))
    constexprs = {"SLIDING_WINDOW_SIZE": -1, "logit_cap": 0.0, "xai_temperature_len": -1, "BLOCK_DMODEL": D,
                  "BLOCK_DPE": 0, "BLOCK_DV": D, "BLOCK_M": 64, "BLOCK_N": 64, "Lq": D, "Lv": D,
                  "USE_CUSTOM_MASK": False, "IS_CAUSAL": True, "SKIP_PREFIX_CUSTOM_MASK": True, "STORE_LSE": False,
                  "SKIP_PREFIX": False, "SKIP_EXTEND": False, "HAS_SINK": False, "STORE_TRANSPOSE": False,
                  "PAGE_SIZE": 1, "Aux0": None, "aux0_stride_t": 0, "aux0_stride_h": 0, "aux0_len": 0}
    launch("_fwd_kernel")((1, H, 1), *args, SCORE_MOD=None, **constexprs)
    torch.testing.assert_close(o.double(), naive_extend(b, sm_scale=SCALE)[0], rtol=1e-5, atol=1e-5)

    def alibi_like(qk: torch.Tensor) -> torch.Tensor:
        return qk

    with pytest.raises(NotImplementedError, match="SCORE_MOD=alibi_like"):
        launch("_fwd_kernel")((1, H, 1), *args, SCORE_MOD=alibi_like, **constexprs)
