"""Plain-torch ports of ``sgl_kernel``'s CPU index helpers: KV-cache locations in and out of ``req_to_token``.

Each is ported from the triton kernel SGLang launches on a GPU at the same call site, which is the reference its
test holds it to (0.5.21 line numbers):

- ``copy_all_layer_kv_cache_cpu``: ``copy_all_layer_kv_cache_tiled`` (``kernels/ops/kvcache/cache_move.py:65``,
  called at :105);
- ``assign_req_to_token_pool_cpu``: ``assign_req_to_token_pool`` (``srt/mem_cache/allocation.py:653``, at :696);
- ``assign_extend_cache_locs_cpu``: ``assign_extend_cache_locs`` (``kernels/ops/speculative/cache_locs.py:395``,
  called at ``srt/speculative/spec_utils.py:799``);
- ``assign_draft_cache_locs_contiguous_cpu``: ``assign_draft_cache_locs_contiguous`` (``cache_locs.py:39``,
  called at ``srt/speculative/eagle_worker_common.py:234``).
"""

from __future__ import annotations

import ctypes

import torch

from sglang_cpu_ports import register

__all__ = ["assign_draft_cache_locs_contiguous_cpu", "assign_extend_cache_locs_cpu", "assign_req_to_token_pool_cpu",
           "build_draft_decode_metadata_cpu", "copy_all_layer_kv_cache_cpu", "fill_accept_out_cache_loc_cpu",
           "fill_bonus_tokens_cpu"]


def _rows(address: int, row_bytes: int, rows: int) -> torch.Tensor:
    """The first ``rows`` rows of ``row_bytes`` bytes at ``address``, as a uint8 view (no copy)."""
    raw = (ctypes.c_uint8 * (row_bytes * rows)).from_address(address)
    return torch.frombuffer(raw, dtype=torch.uint8).view(rows, row_bytes)


@register("sgl_kernel.copy_all_layer_kv_cache_cpu")
def copy_all_layer_kv_cache_cpu(data_ptrs: torch.Tensor, strides: torch.Tensor, tgt_loc: torch.Tensor,
                                src_loc: torch.Tensor) -> None:
    """For every buffer (``data_ptrs[b]``, rows of ``strides[b]`` bytes): row ``tgt_loc[i]`` := row ``src_loc[i]``.

    As the triton kernel, all source rows are read before any target row is written (safe when they overlap).
    """
    if tgt_loc.numel() == 0:
        return
    tgt = tgt_loc.to(torch.int64)
    src = src_loc.to(torch.int64)
    rows = int(torch.maximum(tgt.max(), src.max()).item()) + 1
    for address, stride in zip(data_ptrs.tolist(), strides.tolist(), strict=True):
        view = _rows(int(address), int(stride), rows)
        view[tgt] = view[src]  # advanced indexing gathers a copy first


def _copy_ranges(req_pool_indices: torch.Tensor, start: torch.Tensor, end: torch.Tensor) -> list[tuple[int, int, int]]:
    return [(int(r), int(s), int(e)) for r, s, e in zip(req_pool_indices.tolist(), start.tolist(), end.tolist(), strict=True)]


@register("sgl_kernel.assign_req_to_token_pool_cpu")
def assign_req_to_token_pool_cpu(req_pool_indices: torch.Tensor, req_to_token: torch.Tensor, start_offset: torch.Tensor,
                                 end_offset: torch.Tensor, out_cache_loc: torch.Tensor, pool_len: int) -> None:
    """Request ``i`` (row ``req_pool_indices[i]``): ``req_to_token[row, start[i]:end[i]]`` := the next
    ``end[i] - start[i]`` entries of ``out_cache_loc`` (the requests' slices laid end to end, in batch order)."""
    del pool_len  # the row length; req_to_token's own shape says it
    offset = 0
    for row, start, end in _copy_ranges(req_pool_indices, start_offset, end_offset):
        length = max(end - start, 0)
        if length:
            req_to_token[row, start:end] = out_cache_loc[offset:offset + length].to(req_to_token.dtype)
        offset += length


@register("sgl_kernel.assign_extend_cache_locs_cpu")
def assign_extend_cache_locs_cpu(req_pool_indices: torch.Tensor, req_to_token: torch.Tensor, start_offset: torch.Tensor,
                                 end_offset: torch.Tensor, out_cache_loc: torch.Tensor, pool_len: int) -> None:
    """The reverse of :func:`assign_req_to_token_pool_cpu`: ``out_cache_loc``'s next slice :=
    ``req_to_token[row, start[i]:end[i]]``, request after request."""
    del pool_len
    offset = 0
    for row, start, end in _copy_ranges(req_pool_indices, start_offset, end_offset):
        length = max(end - start, 0)
        if length:
            out_cache_loc[offset:offset + length] = req_to_token[row, start:end].to(out_cache_loc.dtype)
        offset += length


@register("sgl_kernel.assign_draft_cache_locs_contiguous_cpu")
def assign_draft_cache_locs_contiguous_cpu(req_pool_indices: torch.Tensor, req_to_token: torch.Tensor,
                                           seq_lens: torch.Tensor, out_cache_loc: torch.Tensor, pool_len: int, topk: int,
                                           speculative_num_steps: int) -> None:
    """Request ``i``: ``out_cache_loc[i*n:(i+1)*n]`` := ``req_to_token[row, seq_lens[i]:seq_lens[i]+n]``,
    ``n = topk * speculative_num_steps`` (the draft slots reserved after its committed tokens)."""
    del pool_len
    n = int(topk) * int(speculative_num_steps)
    for i, (row, start) in enumerate(zip(req_pool_indices.tolist(), seq_lens.tolist(), strict=True)):
        out_cache_loc[i * n:(i + 1) * n] = req_to_token[int(row), int(start):int(start) + n].to(out_cache_loc.dtype)


@register("sgl_kernel.fill_accept_out_cache_loc_cpu")
def fill_accept_out_cache_loc_cpu(accept_index: torch.Tensor, out_cache_loc: torch.Tensor,
                                  accept_out_cache_loc: torch.Tensor) -> None:
    """``fill_accept_out_cache_loc`` (``kernels/ops/speculative/eagle.py:55``, called at :80): the cache slots of
    the accepted nodes (``accept_index`` flattened, -1 = none), packed to the front in order."""
    flat = accept_index.reshape(-1)
    kept = flat[flat != -1].long()
    accept_out_cache_loc[: kept.numel()] = out_cache_loc[kept].to(accept_out_cache_loc.dtype)


@register("sgl_kernel.fill_bonus_tokens_cpu")
def fill_bonus_tokens_cpu(accept_tokens: torch.Tensor, accept_lens: torch.Tensor, bonus_tokens: torch.Tensor,
                          accept_stride: int) -> None:
    """``fill_bonus_tokens`` (``kernels/ops/speculative/eagle.py:14``, called at :39): request ``i``'s bonus token
    is its last accepted one, ``accept_tokens.flat[i * accept_stride + accept_lens[i] - 1]``."""
    flat = accept_tokens.reshape(-1)
    lens = accept_lens.long()
    index = torch.arange(lens.numel()) * int(accept_stride) + lens - 1
    bonus_tokens[: lens.numel()] = flat[index].to(bonus_tokens.dtype)


@register("sgl_kernel.build_draft_decode_metadata_cpu")
def build_draft_decode_metadata_cpu(req_to_token: torch.Tensor, req_pool_indices: torch.Tensor, seq_lens: torch.Tensor,
                                    topk: int, num_steps: int, pool_len: int) -> torch.Tensor:
    """The draft steps' ``req_to_token`` (0.5.21 ``srt/layers/attention/intel_amx_backend.py:407``): row
    ``b * topk + t`` is request ``b``'s committed slots, then candidate ``t``'s ``num_steps`` draft slots, which
    sit at ``req_to_token[row, seq_len + t * num_steps + s]`` (page size 1: the layout of
    ``generate_draft_decode_kv_indices``, ``kernels/ops/speculative/cache_locs.py:157-164``, that its GPU
    twin reads)."""
    topk, num_steps = int(topk), int(num_steps)
    rows = req_pool_indices.numel()
    out = torch.zeros(rows * topk, int(pool_len), dtype=req_to_token.dtype)
    for b, (row, seq_len) in enumerate(zip(req_pool_indices.tolist(), seq_lens.tolist(), strict=True)):
        row, seq_len = int(row), int(seq_len)
        for t in range(topk):
            out[b * topk + t, :seq_len] = req_to_token[row, :seq_len]
            drafts = req_to_token[row, seq_len + t * num_steps : seq_len + (t + 1) * num_steps]
            out[b * topk + t, seq_len : seq_len + num_steps] = drafts
    return out
