"""Plain-torch ports of the triton attention backend's kernels: extend (prefill/verify) and split-KV decode.

Each port computes what one launch of the triton kernel stores, for every program of its grid at once, from
the same pointers and strides (``triton_common.strided``/``gather_heads`` reproduce the pointer arithmetic):

- ``_fwd_kernel`` (``extend_attention_fwd``): per sequence, the extend tokens' queries attend to the sequence's
  prefix in the KV pool (through ``kv_indices``) and to the extend tokens' own K/V, with the kernel's masks:
  causal by ``BLOCK_M`` row blocks, the custom (speculative tree) mask with its window offset, the sliding
  window (``q_id <= kv_id + SLIDING_WINDOW_SIZE``), logit cap, xai temperature, sinks. ``k_scale``/``v_scale``
  apply to the prefix part only, as in the kernel. 0.5.15 adds ``LSE_Extend``, ``SKIP_PREFIX``/``SKIP_EXTEND``
  and paged KV addressing (``PAGE_SIZE``).
- ``_fwd_kernel_stage1`` / ``_fwd_grouped_kernel_stage1`` (``decode_attention_fwd``): one query per sequence,
  the KV split into ``num_kv_splits`` chunks of ``cdiv(cdiv(len, splits), MIN_BLOCK_KV) * MIN_BLOCK_KV``; each
  non-empty chunk stores its normalized partial output in ``Att_Out[b, h, split]`` and its log-sum-exp at
  ``Att_Lse[(b*s_ob + h*s_oh + split*s_os) // Lv]`` (the kernel's stride trick).
- ``_fwd_kernel_stage2``: merges the non-empty chunks by their log-sum-exp, adds the sink, scales by ``v_scale``.

Precision follows the kernels: products accumulate in float32, queries are cast to the KV dtype before the QK
dot (the grouped decode and the prefix part of extend), probabilities to V's dtype before the PV dot.
Sources (the kernels' ``def`` lines): sglang 0.5.14 ``srt/layers/attention/triton_ops/extend_attention.py:240``
and ``decode_attention.py:45, 253, 523``; 0.5.15 ``extend_attention.py:241`` and ``decode_attention.py:96, 351,
667``; 0.5.16 ``sglang/kernels/ops/attention/extend_attention.py:242``, ``decode_attention.py:97, 384, 732``.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from sglang_cpu_ports import register
from sglang_cpu_ports.triton_common import Layout, as_int, bind, flat, gather_heads, grid_of, strided

__all__ = ["decode_stage1", "decode_stage2", "extend_attention"]

_EXTEND_014 = (
    "Q_Extend", "K_Extend", "V_Extend", "O_Extend", "K_Buffer", "V_Buffer", "qo_indptr", "kv_indptr", "kv_indices",
    "mask_ptr", "mask_indptr", "sink_ptr", "window_kv_offset_ptr", "sm_scale", "k_scale", "v_scale", "kv_group_num",
    "stride_qbs", "stride_qh", "stride_kbs", "stride_kh", "stride_vbs", "stride_vh", "stride_obs", "stride_oh",
    "stride_buf_kbs", "stride_buf_kh", "stride_buf_vbs", "stride_buf_vh", "SLIDING_WINDOW_SIZE", "logit_cap",
    "xai_temperature_len", "Lq", "Lv", "BLOCK_DMODEL", "BLOCK_DPE", "BLOCK_DV", "BLOCK_M", "BLOCK_N",
    "USE_CUSTOM_MASK", "IS_CAUSAL", "SKIP_PREFIX_CUSTOM_MASK", "STORE_TRANSPOSE", "HAS_SINK",
)  # fmt: skip
_EXTEND_015 = (
    "Q_Extend", "K_Extend", "V_Extend", "O_Extend", "LSE_Extend", "K_Buffer", "V_Buffer", "qo_indptr", "kv_indptr",
    "kv_indices", "mask_ptr", "mask_indptr", "sink_ptr", "window_kv_offset_ptr", "sm_scale", "k_scale", "v_scale",
    "kv_group_num", "stride_qbs", "stride_qh", "stride_kbs", "stride_kh", "stride_vbs", "stride_vh", "stride_obs",
    "stride_oh", "stride_lse_bs", "stride_lse_h", "stride_buf_kbs", "stride_buf_kh", "stride_buf_vbs",
    "stride_buf_vh", "stride_buf_kpage", "stride_buf_ktok", "stride_buf_vpage", "stride_buf_vtok",
    "SLIDING_WINDOW_SIZE", "logit_cap", "xai_temperature_len", "Lq", "Lv", "BLOCK_DMODEL", "BLOCK_DPE", "BLOCK_DV",
    "BLOCK_M", "BLOCK_N", "USE_CUSTOM_MASK", "IS_CAUSAL", "SKIP_PREFIX_CUSTOM_MASK", "STORE_LSE", "SKIP_PREFIX",
    "SKIP_EXTEND", "STORE_TRANSPOSE", "HAS_SINK", "PAGE_SIZE",
)  # fmt: skip
# 0.5.16 moved the kernels to sglang/kernels/ops/attention/ and appended a score_mod hook (a @triton.jit function
# inlined into the kernel, never None-checked at run time here: a launch with one is refused, naming it).
_SCORE_MOD = ("SCORE_MOD", "Aux0", "aux0_stride_t", "aux0_stride_h", "aux0_len")
_SCORE_MOD_DEFAULTS = (("SCORE_MOD", None), ("Aux0", None), ("aux0_stride_t", 0), ("aux0_stride_h", 0), ("aux0_len", 0))
EXTEND_LAYOUTS = (
    Layout("0.5.14 extend_attention.py:240", _EXTEND_014),
    Layout("0.5.15 extend_attention.py:241", _EXTEND_015, defaults=(("PAGE_SIZE", 1),)),
    Layout("0.5.16 kernels/ops/attention/extend_attention.py:242", _EXTEND_015 + _SCORE_MOD,
           defaults=(("PAGE_SIZE", 1), *_SCORE_MOD_DEFAULTS)),
)

_STAGE1_HEAD = ("Q", "K_Buffer", "V_Buffer", "sm_scale_withk", "kv_indptr", "kv_indices", "Att_Out", "Att_Lse",
                "num_kv_splits", "stride_qbs", "stride_qh", "stride_buf_kbs", "stride_buf_kh", "stride_buf_vbs",
                "stride_buf_vh")  # fmt: skip
_PAGE_STRIDES = ("stride_buf_kpage", "stride_buf_ktok", "stride_buf_vpage", "stride_buf_vtok")
_MID_STRIDES = ("stride_mid_ob", "stride_mid_oh", "stride_mid_os")
_STAGE1_TAIL = ("kv_group_num", "BLOCK_DMODEL", "BLOCK_DV", "BLOCK_N", "MIN_BLOCK_KV", "logit_cap", "Lk", "Lv",
                "xai_temperature_len")  # fmt: skip
STAGE1_LAYOUTS = (
    Layout("0.5.14 decode_attention.py:45", _STAGE1_HEAD + _MID_STRIDES + _STAGE1_TAIL),
    Layout("0.5.15 decode_attention.py:96", _STAGE1_HEAD + _PAGE_STRIDES + _MID_STRIDES + _STAGE1_TAIL
           + ("PAGE_SIZE",)),
    Layout("0.5.16 kernels/ops/attention/decode_attention.py:97", _STAGE1_HEAD + _PAGE_STRIDES + _MID_STRIDES
           + _STAGE1_TAIL + ("PAGE_SIZE",) + _SCORE_MOD, defaults=_SCORE_MOD_DEFAULTS),
)  # fmt: skip
_GROUPED_TAIL = ("kv_group_num", "q_head_num", "BLOCK_DMODEL", "BLOCK_DPE", "BLOCK_DV", "BLOCK_N", "BLOCK_H",
                 "MIN_BLOCK_KV", "logit_cap", "xai_temperature_len", "Lk", "Lv", "HAS_MLA", "USE_PDL")  # fmt: skip
GROUPED_LAYOUTS = (
    Layout("0.5.14 decode_attention.py:253", _STAGE1_HEAD + _MID_STRIDES + _GROUPED_TAIL,
           defaults=(("HAS_MLA", False), ("USE_PDL", False))),
    Layout("0.5.15 decode_attention.py:351", _STAGE1_HEAD + _PAGE_STRIDES + _MID_STRIDES + _GROUPED_TAIL
           + ("PAGE_SIZE",), defaults=(("HAS_MLA", False), ("USE_PDL", False), ("PAGE_SIZE", 1))),
    Layout("0.5.16 kernels/ops/attention/decode_attention.py:384", _STAGE1_HEAD + _PAGE_STRIDES + _MID_STRIDES
           + _GROUPED_TAIL + ("PAGE_SIZE",) + _SCORE_MOD,
           defaults=(("HAS_MLA", False), ("USE_PDL", False), ("PAGE_SIZE", 1), *_SCORE_MOD_DEFAULTS)),
)  # fmt: skip
STAGE2_LAYOUTS = (
    Layout("0.5.14 decode_attention.py:523, 0.5.15 :667, 0.5.16 kernels/ops/attention/decode_attention.py:732",
           ("Mid_O", "Mid_O_1", "O", "v_scale", "kv_indptr", "num_kv_splits", "sink_ptr", "stride_mid_ob",
            "stride_mid_oh", "stride_mid_os", "stride_obs", "stride_oh", "MAX_KV_SPLITS", "MIN_BLOCK_KV", "BLOCK_DV",
            "Lv", "HAS_SINK", "USE_PDL"), defaults=(("USE_PDL", False),)),
)  # fmt: skip


def _scalar(value: Any) -> float:
    return float(value.item()) if isinstance(value, torch.Tensor) else float(value)


def _no_score_mod(kernel: str, a: dict[str, Any]) -> None:
    if a.get("SCORE_MOD") is not None:
        name = getattr(a["SCORE_MOD"], "__name__", repr(a["SCORE_MOD"]))
        raise NotImplementedError(f"triton kernel {kernel!r} launched with SCORE_MOD={name}: no plain-torch port of a "
                                  "score_mod (real-SGLang CPU build)")


def _kv_row_offsets(a: dict[str, Any], locs: torch.Tensor, which: str) -> torch.Tensor:
    """Where slot ``loc`` of the K (``which='k'``) or V buffer starts: ``loc * stride`` or the paged address."""
    page = as_int(a.get("PAGE_SIZE", 1))
    locs = locs.to(torch.int64)
    if page == 1:
        return locs * as_int(a[f"stride_buf_{which}bs"])
    return (locs // page) * as_int(a[f"stride_buf_{which}page"]) + (locs % page) * as_int(a[f"stride_buf_{which}tok"])


def _cap(scores: torch.Tensor, logit_cap: float) -> torch.Tensor:
    # The kernels' tanh is 2*sigmoid(2x) - 1, the same function.
    return logit_cap * torch.tanh(scores / logit_cap) if logit_cap > 0 else scores


def _xai_scale(query_index: torch.Tensor, xai_len: int) -> torch.Tensor:
    """The kernels' xai temperature: log2(i) / log2(xai_len) for query index i > xai_len, else 1."""
    scale = 1.0 / math.log2(float(xai_len))
    return torch.where(query_index > xai_len, torch.log2(query_index.to(torch.float32).clamp(min=1)) * scale, 1.0)


def _mask_values(mask_ptr: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    if index.numel() == 0:
        return torch.zeros(index.shape, dtype=torch.bool)
    return flat(mask_ptr, int(index.max()) + 1)[index].to(torch.bool)


@register("triton._fwd_kernel")
def extend_attention(grid: Any, *args: Any, **kwargs: Any) -> None:
    """``_fwd_kernel`` of ``extend_attention.py``: writes ``O_Extend`` (and ``LSE_Extend`` when asked)."""
    a = bind("_fwd_kernel", EXTEND_LAYOUTS, args, kwargs)
    _no_score_mod("_fwd_kernel", a)
    num_seqs, num_heads, num_blocks = grid_of(grid, a)
    block_m, lq, lv = as_int(a["BLOCK_M"]), as_int(a["Lq"]), as_int(a["Lv"])
    group = as_int(a["kv_group_num"])
    window = as_int(a["SLIDING_WINDOW_SIZE"])
    logit_cap, xai_len = float(a["logit_cap"]), as_int(a["xai_temperature_len"])
    causal, custom, skip_prefix_mask = bool(a["IS_CAUSAL"]), bool(a["USE_CUSTOM_MASK"]), bool(a["SKIP_PREFIX_CUSTOM_MASK"])
    skip_prefix, skip_extend = bool(a.get("SKIP_PREFIX", False)), bool(a.get("SKIP_EXTEND", False))
    sm_scale, k_scale, v_scale = _scalar(a["sm_scale"]), _scalar(a["k_scale"]), _scalar(a["v_scale"])
    qo_indptr, kv_indptr = a["qo_indptr"].to(torch.int64), a["kv_indptr"].to(torch.int64)
    heads = torch.arange(num_heads)
    kv_heads = heads // group
    num_kv_heads = int(kv_heads.max()) + 1
    out, k_buffer, v_buffer = a["O_Extend"], a["K_Buffer"], a["V_Buffer"]

    for seq in range(num_seqs):
        q_start = int(qo_indptr[seq])
        extend_len = int(qo_indptr[seq + 1]) - q_start
        kv_start = int(kv_indptr[seq])
        prefix_len = int(kv_indptr[seq + 1]) - kv_start
        rows = min(extend_len, num_blocks * block_m)  # rows past the grid's blocks are never stored
        if rows <= 0:
            continue
        seq_len = prefix_len + extend_len
        row_ids = torch.arange(rows)
        q = strided(a["Q_Extend"], (q_start + rows, num_heads, lq), (a["stride_qbs"], a["stride_qh"], 1))[q_start:]
        q = q.transpose(0, 1)  # [H, rows, Lq]
        mask_start = int(a["mask_indptr"][seq]) if custom else 0
        window_offset = int(a["window_kv_offset_ptr"][seq]) if custom and window > 0 else 0
        mask_row = mask_start + row_ids[:, None] * (seq_len + window_offset) + window_offset
        xai = _xai_scale(prefix_len + row_ids, xai_len)[None, :, None] if xai_len > 0 else None

        scores: list[torch.Tensor] = []
        masks: list[torch.Tensor] = []
        values: list[torch.Tensor] = []
        value_scales: list[float] = []
        if prefix_len > 0 and not skip_prefix:
            locs = a["kv_indices"][kv_start:kv_start + prefix_len]
            keys = gather_heads(k_buffer, _kv_row_offsets(a, locs, "k"), as_int(a["stride_buf_kh"]), num_kv_heads, lq)
            vals = gather_heads(v_buffer, _kv_row_offsets(a, locs, "v"), as_int(a["stride_buf_vh"]), num_kv_heads, lv)
            s = torch.einsum("hmd,nhd->hmn", q.to(keys.dtype).float(), keys[:, kv_heads].float()) * (sm_scale * k_scale)
            s = _cap(s, logit_cap)
            if xai is not None:
                s = s * xai
            cols = torch.arange(prefix_len)
            allowed = torch.ones((rows, prefix_len), dtype=torch.bool)
            if custom and not skip_prefix_mask:
                allowed &= _mask_values(a["mask_ptr"], mask_row + cols[None, :])
            if window > 0:
                allowed &= (prefix_len + row_ids[:, None]) <= (cols[None, :] + window)
            scores.append(s)
            masks.append(allowed)
            values.append(vals[:, kv_heads])
            value_scales.append(v_scale)
        if not skip_extend:
            keys = strided(a["K_Extend"], (q_start + extend_len, num_kv_heads, lq), (a["stride_kbs"], a["stride_kh"], 1))
            vals = strided(a["V_Extend"], (q_start + extend_len, num_kv_heads, lv), (a["stride_vbs"], a["stride_vh"], 1))
            keys, vals = keys[q_start:], vals[q_start:]
            s = torch.einsum("hmd,nhd->hmn", q.float(), keys[:, kv_heads].float()) * sm_scale
            s = _cap(s, logit_cap)
            if xai is not None:
                s = s * xai
            cols = torch.arange(extend_len)
            # Each row block sees the extend keys up to its block's end when causal (cur_block_m_end).
            block_end = torch.full((rows,), extend_len)
            if causal:
                block_end = torch.clamp((row_ids // block_m + 1) * block_m, max=extend_len)
            allowed = cols[None, :] < block_end[:, None]
            if custom:
                allowed &= _mask_values(a["mask_ptr"], mask_row + prefix_len + cols[None, :])
            elif causal:
                allowed &= row_ids[:, None] >= cols[None, :]
            if window > 0:
                allowed &= row_ids[:, None] <= (cols[None, :] + window)
            scores.append(s)
            masks.append(allowed)
            values.append(vals[:, kv_heads])
            value_scales.append(1.0)

        if scores:
            masked = [torch.where(m[None], s, float("-inf")) for s, m in zip(scores, masks, strict=True)]
            row_max = torch.cat(masked, dim=-1).amax(dim=-1)  # [H, rows]
            # A row whose processed keys are all masked keeps the kernel's -1e20 floor (row_max_fixed).
            e_max = torch.where(row_max == float("-inf"), -1e20, row_max)
            acc = torch.zeros((num_heads, rows, lv), dtype=torch.float32)
            deno = torch.zeros((num_heads, rows), dtype=torch.float32)
            for s, vals, scale in zip(masked, values, value_scales, strict=True):
                p = torch.exp(s - e_max[..., None])
                deno += p.sum(dim=-1)
                acc += torch.einsum("hmn,nhd->hmd", p.to(vals.dtype).float(), vals.float()) * scale
        else:
            e_max = torch.full((num_heads, rows), float("-inf"))
            acc = torch.zeros((num_heads, rows, lv), dtype=torch.float32)
            deno = torch.zeros((num_heads, rows), dtype=torch.float32)
        if bool(a["HAS_SINK"]):
            sinks = a["sink_ptr"][:num_heads].float()
            deno = deno + torch.exp(sinks[:, None] - e_max)
        result = (acc / deno[..., None]).transpose(0, 1)  # [rows, H, Lv]
        o_view = strided(out, (q_start + rows, num_heads, lv), (a["stride_obs"], a["stride_oh"], 1))[q_start:]
        o_view.copy_(result.to(out.dtype))
        if bool(a.get("STORE_LSE", False)):
            lse = (torch.log(deno) + e_max).transpose(0, 1)  # [rows, H]
            lse_view = strided(a["LSE_Extend"], (q_start + rows, num_heads), (a["stride_lse_bs"], a["stride_lse_h"]))
            lse_view[q_start:].copy_(lse.to(a["LSE_Extend"].dtype))


def _cdiv(x: int, y: int) -> int:
    return (x + y - 1) // y


def _split_bounds(seq_len: int, splits: int, min_block_kv: int, split_id: int) -> tuple[int, int]:
    """The KV range of one split: ``kv_len_per_split = cdiv(cdiv(len, splits), MIN_BLOCK_KV) * MIN_BLOCK_KV``."""
    per_split = _cdiv(_cdiv(seq_len, splits), min_block_kv) * min_block_kv
    start = per_split * split_id
    return start, min(start + per_split, seq_len)


def _decode_stage1(a: dict[str, Any], grid: tuple[int, ...], head_groups: list[tuple[list[int], int]],
                   lk: int, grouped: bool) -> None:  # fmt: skip
    """Store each non-empty split's partial output and log-sum-exp for the given (heads, kv head) programs."""
    lv = as_int(a["Lv"])
    kv_indptr, kv_indices = a["kv_indptr"].to(torch.int64), a["kv_indices"]
    num_batches, _, max_splits = grid
    sm_scale = _scalar(a["sm_scale_withk"])
    logit_cap, xai_len = float(a["logit_cap"]), as_int(a["xai_temperature_len"])
    min_block_kv = as_int(a["MIN_BLOCK_KV"])
    has_mla = bool(a.get("HAS_MLA", False))
    s_ob, s_oh, s_os = (as_int(a[n]) for n in _MID_STRIDES)
    num_heads = max(h for heads, _ in head_groups for h in heads) + 1
    att_out, att_lse = a["Att_Out"], a["Att_Lse"]
    for batch in range(num_batches):
        kv_start = int(kv_indptr[batch])
        seq_len = int(kv_indptr[batch + 1]) - kv_start
        splits = as_int(a["num_kv_splits"][batch])
        q_all = strided(a["Q"], (batch + 1, num_heads, lk), (a["stride_qbs"], a["stride_qh"], 1))[batch]
        for split in range(max_splits):
            start, end = _split_bounds(seq_len, splits, min_block_kv, split)
            if end <= start:
                continue
            locs = kv_indices[kv_start + start:kv_start + end]
            for heads, kv_head in head_groups:
                k_rows = _kv_row_offsets(a, locs, "k") + kv_head * as_int(a["stride_buf_kh"])
                keys = gather_heads(a["K_Buffer"], k_rows, 0, 1, lk)[:, 0]  # [n, Lk]
                if has_mla:
                    vals = keys[:, :lv]  # v = tl.trans(k)
                else:
                    v_rows = _kv_row_offsets(a, locs, "v") + kv_head * as_int(a["stride_buf_vh"])
                    vals = gather_heads(a["V_Buffer"], v_rows, 0, 1, lv)[:, 0]
                q = q_all[heads]
                q = q.to(keys.dtype) if grouped else q
                s = (q.float() @ keys.float().T) * sm_scale
                s = _cap(s, logit_cap)
                if xai_len > 0:
                    s = s * _xai_scale(torch.tensor(seq_len - 1), xai_len)
                e_max = s.amax(dim=-1)
                p = torch.exp(s - e_max[:, None])
                p_v = p.to(vals.dtype).float() if grouped else p
                acc = p_v @ vals.float()
                e_sum = p.sum(dim=-1)
                for i, head in enumerate(heads):
                    offset = batch * s_ob + head * s_oh + split * s_os
                    flat(att_out, offset + lv)[offset:offset + lv] = (acc[i] / e_sum[i]).to(att_out.dtype)
                    flat(att_lse, offset // lv + 1)[offset // lv] = (e_max[i] + torch.log(e_sum[i])).to(att_lse.dtype)


@register("triton._fwd_kernel_stage1")
def decode_stage1(grid: Any, *args: Any, **kwargs: Any) -> None:
    """``_fwd_kernel_stage1`` (MHA decode, one head per program)."""
    a = bind("_fwd_kernel_stage1", STAGE1_LAYOUTS, args, kwargs)
    _no_score_mod("_fwd_kernel_stage1", a)
    g = grid_of(grid, a)
    group = as_int(a["kv_group_num"])
    _decode_stage1(a, g, [([h], h // group) for h in range(g[1])], as_int(a["Lk"]), grouped=False)


@register("triton._fwd_grouped_kernel_stage1")
def decode_grouped_stage1(grid: Any, *args: Any, **kwargs: Any) -> None:
    """``_fwd_grouped_kernel_stage1`` (GQA/MQA/MLA decode, up to BLOCK_H heads of one KV head per program)."""
    a = bind("_fwd_grouped_kernel_stage1", GROUPED_LAYOUTS, args, kwargs)
    _no_score_mod("_fwd_grouped_kernel_stage1", a)
    g = grid_of(grid, a)
    group, block_h, q_heads = as_int(a["kv_group_num"]), as_int(a["BLOCK_H"]), as_int(a["q_head_num"])
    valid = block_h if block_h < group else group
    programs = []
    for head_id in range(g[1]):
        heads = [h for h in range(head_id * valid, head_id * valid + block_h)
                 if h < (head_id + 1) * valid and h < q_heads]  # fmt: skip
        if heads:
            programs.append((heads, head_id // -(-group // block_h)))
    # Lk (not BLOCK_DMODEL + BLOCK_DPE) is what the dot covers: 576 = 512 + 64 and 288 = 256 + 32 exactly.
    _decode_stage1(a, g, programs, as_int(a["Lk"]), grouped=True)


@register("triton._fwd_kernel_stage2")
def decode_stage2(grid: Any, *args: Any, **kwargs: Any) -> None:
    """``_fwd_kernel_stage2``: merge the splits' partial outputs by log-sum-exp into ``O``."""
    a = bind("_fwd_kernel_stage2", STAGE2_LAYOUTS, args, kwargs)
    num_batches, num_heads = grid_of(grid, a)[:2]
    lv, min_block_kv, max_splits = as_int(a["Lv"]), as_int(a["MIN_BLOCK_KV"]), as_int(a["MAX_KV_SPLITS"])
    s_ob, s_oh, s_os = (as_int(a[n]) for n in _MID_STRIDES)
    kv_indptr = a["kv_indptr"].to(torch.int64)
    v_scale = _scalar(a["v_scale"])
    mid_o, mid_lse = a["Mid_O"], a["Mid_O_1"]
    out = strided(a["O"], (num_batches, num_heads, lv), (a["stride_obs"], a["stride_oh"], 1))
    for batch in range(num_batches):
        seq_len = int(kv_indptr[batch + 1]) - int(kv_indptr[batch])
        splits = as_int(a["num_kv_splits"][batch])
        for head in range(num_heads):
            base = batch * s_ob + head * s_oh
            parts, lses = [], []
            for split in range(max_splits):
                start, end = _split_bounds(seq_len, splits, min_block_kv, split)
                if end > start:
                    offset = base + split * s_os
                    parts.append(flat(mid_o, offset + lv)[offset:offset + lv].float())
                    lses.append(flat(mid_lse, base // lv + split * s_os // lv + 1)[base // lv + split * s_os // lv].float())
            if parts:
                lse = torch.stack(lses)
                e_max = lse.max()
                weights = torch.exp(lse - e_max)
                acc = (weights[:, None] * torch.stack(parts)).sum(dim=0)
                e_sum = weights.sum()
            else:
                e_max = torch.tensor(float("-inf"))
                acc = torch.zeros(lv)
                e_sum = torch.tensor(0.0)
            if bool(a["HAS_SINK"]):
                e_sum = e_sum + torch.exp(a["sink_ptr"][head].float() - e_max)
            out[batch, head].copy_((acc / e_sum * v_scale).to(out.dtype))
