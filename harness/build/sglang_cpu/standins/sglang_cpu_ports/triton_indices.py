"""Plain-torch ports of the index kernels around the KV pool: writing a request's token slots, reading them
back as attention's ``kv_indices``, positions of an extend batch, last locations.

Sources (the kernels' ``def`` lines, the same in sglang 0.5.14 and 0.5.15 unless two are given):
- ``write_req_to_token_pool_triton``: ``srt/mem_cache/triton_ops/common.py:9``. Its ``prefix_tensors`` argument
  is a table of ``data_ptr()`` addresses of int64 tensors (``write_cache_indices``, ``srt/mem_cache/common.py:120``,
  0.5.15 ``:124``), read here through the addresses as the kernel does.
- ``create_flashinfer_kv_indices_triton``: ``srt/layers/attention/triton_ops/kv_indices.py:9``.
- ``compute_position_kernel``: ``srt/model_executor/triton_ops/position.py:33``.
- ``get_last_loc_kernel`` / ``_get_last_loc_safe_kernel``: ``srt/mem_cache/triton_ops/common.py:121, 60``.
- ``copy_all_layer_kv_cache_tiled``: ``srt/mem_cache/triton_ops/cache_move.py:53`` (0.5.15 ``:54``), launched over
  the pool's raw buffer addresses (``srt/mem_cache/memory_pool.py:1202``, 0.5.15 ``:1438``).
"""

from __future__ import annotations

from typing import Any

import torch

from sglang_cpu_ports import register
from sglang_cpu_ports.triton_common import Layout, as_int, bind, grid_of, int64_at, raw_bytes

__all__ = ["compute_position", "copy_all_layer_kv_cache", "create_kv_indices", "get_last_loc", "write_req_to_token_pool"]

WRITE_REQ_TO_TOKEN = (Layout("0.5.14/0.5.15 mem_cache/triton_ops/common.py:9",
                             ("req_to_token_ptr", "req_pool_indices", "prefix_tensors", "pre_lens", "seq_lens",
                              "extend_lens", "out_cache_loc", "req_to_token_ptr_stride")),)  # fmt: skip
CREATE_KV_INDICES = (Layout("0.5.14/0.5.15 attention/triton_ops/kv_indices.py:9",
                            ("req_to_token_ptr", "req_pool_indices_ptr", "page_kernel_lens_ptr", "kv_indptr",
                             "kv_start_idx", "kv_indices_ptr", "req_to_token_ptr_stride")),)  # fmt: skip
COMPUTE_POSITION = (Layout("0.5.14/0.5.15 model_executor/triton_ops/position.py:33",
                           ("positions", "extend_start_loc", "extend_prefix_lens", "extend_seq_lens", "has_prefix")),)
LAST_LOC = (Layout("0.5.14/0.5.15 mem_cache/triton_ops/common.py:121",
                   ("req_to_token", "req_pool_indices_tensor", "prefix_lens_tensor", "result", "num_tokens",
                    "req_to_token_stride", "BLOCK_SIZE")),)  # fmt: skip
LAST_LOC_SAFE = (Layout("0.5.14/0.5.15 mem_cache/triton_ops/common.py:60",
                        ("req_to_token", "req_pool_indices_tensor", "prefix_lens_tensor", "result_i32", "num_tokens",
                         "req_to_token_stride", "BLOCK_SIZE", "PREFIX_DTYPE_IS_I64")),)  # fmt: skip


def _row(table: torch.Tensor, row: int, stride: int) -> torch.Tensor:
    """Row ``row`` of a 2-D table addressed with the kernel's stride (``ptr + row * stride``)."""
    return table.view(-1)[row * stride:(row + 1) * stride] if table.is_contiguous() else table[row]


@register("triton.write_req_to_token_pool_triton")
def write_req_to_token_pool(grid: Any, *args: Any, **kwargs: Any) -> None:
    """Per request: ``req_to_token[req, :pre_len] = prefix``, then ``[pre_len:seq_len] = out_cache_loc[cumsum:]``."""
    a = bind("write_req_to_token_pool_triton", WRITE_REQ_TO_TOKEN, args, kwargs)
    table, stride = a["req_to_token_ptr"], as_int(a["req_to_token_ptr_stride"])
    extend_lens = a["extend_lens"].to(torch.int64)
    for pid in range(grid_of(grid, a)[0]):
        req = as_int(a["req_pool_indices"][pid])
        pre_len, seq_len = as_int(a["pre_lens"][pid]), as_int(a["seq_lens"][pid])
        row = _row(table, req, stride)
        if pre_len > 0:
            row[:pre_len] = int64_at(as_int(a["prefix_tensors"][pid]), pre_len).to(table.dtype)
        start = int(extend_lens[:pid].sum())  # the kernel's cumsum over earlier programs' extend_lens
        row[pre_len:seq_len] = a["out_cache_loc"][start:start + seq_len - pre_len].to(table.dtype)


@register("triton.create_flashinfer_kv_indices_triton")
def create_kv_indices(grid: Any, *args: Any, **kwargs: Any) -> None:
    """Per request: ``kv_indices[kv_indptr[i]:+len] = req_to_token[req, start:start+len]``."""
    a = bind("create_flashinfer_kv_indices_triton", CREATE_KV_INDICES, args, kwargs)
    table, stride, out = a["req_to_token_ptr"], as_int(a["req_to_token_ptr_stride"]), a["kv_indices_ptr"]
    starts = a["kv_start_idx"]
    for pid in range(grid_of(grid, a)[0]):
        req = as_int(a["req_pool_indices_ptr"][pid])
        offset = as_int(a["kv_indptr"][pid])
        start = as_int(starts[pid]) if starts is not None else 0  # `if kv_start_idx:` is a None test
        length = as_int(a["page_kernel_lens_ptr"][pid])
        if length > 0:
            out[offset:offset + length] = _row(table, req, stride)[start:start + length].to(out.dtype)


@register("triton.compute_position_kernel")
def compute_position(grid: Any, *args: Any, **kwargs: Any) -> None:
    """Per request: positions ``prefix_len + [0, seq_len)`` at its cumulative start; ``extend_start_loc`` = start."""
    a = bind("compute_position_kernel", COMPUTE_POSITION, args, kwargs)
    seq_lens = a["extend_seq_lens"].to(torch.int64)
    for pid in range(grid_of(grid, a)[0]):
        prefix = as_int(a["extend_prefix_lens"][pid]) if bool(a["has_prefix"]) else 0
        length, start = int(seq_lens[pid]), int(seq_lens[:pid].sum())
        a["positions"][start:start + length] = torch.arange(prefix, prefix + length, dtype=a["positions"].dtype)
        a["extend_start_loc"][pid] = start


def _last_loc(a: dict[str, Any], result: torch.Tensor) -> None:
    count = as_int(a["num_tokens"])
    prefix = a["prefix_lens_tensor"][:count].to(torch.int64)
    reqs = a["req_pool_indices_tensor"][:count].to(torch.int64)
    index = reqs * as_int(a["req_to_token_stride"]) + (prefix - 1)
    table = a["req_to_token"].reshape(-1)
    values = torch.where(prefix > 0, table[torch.clamp(index, min=0)].to(torch.int64), -1)
    result[:count] = values.to(result.dtype)


@register("triton.get_last_loc_kernel")
def get_last_loc(grid: Any, *args: Any, **kwargs: Any) -> None:
    """``result[i] = req_to_token[req[i], prefix[i] - 1]``, or -1 where ``prefix[i] == 0``."""
    a = bind("get_last_loc_kernel", LAST_LOC, args, kwargs)
    _last_loc(a, a["result"])


@register("triton._get_last_loc_safe_kernel")
def get_last_loc_safe(grid: Any, *args: Any, **kwargs: Any) -> None:
    """The int32-result variant of :func:`get_last_loc`."""
    a = bind("_get_last_loc_safe_kernel", LAST_LOC_SAFE, args, kwargs)
    _last_loc(a, a["result_i32"])


COPY_ALL_LAYERS = (Layout("0.5.14 mem_cache/triton_ops/cache_move.py:53, 0.5.15 :54",
                          ("data_ptrs", "strides", "tgt_loc_ptr", "src_loc_ptr", "num_locs", "num_locs_upper",
                           "BYTES_PER_TILE")),)  # fmt: skip


@register("triton.copy_all_layer_kv_cache_tiled")
def copy_all_layer_kv_cache(grid: Any, *args: Any, **kwargs: Any) -> None:
    """For each buffer b (a raw address and a row stride in bytes): rows ``src[i]`` copied to rows ``tgt[i]``.

    All sources are read before any target is written, as each program loads its whole tile before storing it
    (the kernel's "safe for in-place copy").
    """
    a = bind("copy_all_layer_kv_cache_tiled", COPY_ALL_LAYERS, args, kwargs)
    buffers, tiles = grid_of(grid, a)[:2]
    count = min(as_int(a["num_locs"]), as_int(a["num_locs_upper"]))
    if count <= 0:
        return
    src = a["src_loc_ptr"][:count].to(torch.int64)
    tgt = a["tgt_loc_ptr"][:count].to(torch.int64)
    for buffer in range(buffers):
        stride = as_int(a["strides"][buffer])
        width = min(stride, tiles * as_int(a["BYTES_PER_TILE"]))
        rows = int(torch.maximum(src.max(), tgt.max())) + 1
        memory = raw_bytes(as_int(a["data_ptrs"][buffer]), rows * stride).view(rows, stride)
        memory[tgt, :width] = memory[src, :width].clone()
