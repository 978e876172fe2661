"""Plain-torch ports of the speculative-decoding slot kernels: which KV slots the draft and verify tokens use.

Sources (the kernels' ``def`` lines): sglang 0.5.14 ``srt/speculative/triton_ops/cache_locs.py`` (the same
kernels one line further down in 0.5.15) and ``srt/speculative/triton_ops/eagle.py`` (unchanged in 0.5.15):
- ``assign_req_to_token_pool`` (:16): ``req_to_token[req, start:end] = out_cache_loc[cum:cum+end-start]``,
  ``cum`` the sum of earlier programs' ``end - start``;
- ``assign_draft_cache_locs_contiguous`` (:70): the reverse, ``topk*steps`` slots from ``seq_len`` on;
- ``generate_draft_decode_kv_indices`` (:97): per step, per request, per topk branch, the prefix slots then
  the branch's draft slots, and ``kv_indptr``;
- ``align_evict_mask_to_page_size`` (:178), ``get_target_cache_loc`` (:225), ``filter_finished_cache_loc_kernel``
  (:271), ``assign_extend_cache_locs`` (:303, the reverse of ``assign_req_to_token_pool``);
- ``fill_bonus_tokens`` (eagle.py:6), ``fill_accept_out_cache_loc`` (eagle.py:25).
"""

from __future__ import annotations

from typing import Any

import torch

from sglang_cpu_ports import register
from sglang_cpu_ports.triton_common import Layout, as_int, bind, grid_of

__all__ = ["align_evict_mask_to_page_size", "assign_draft_cache_locs_contiguous", "assign_extend_cache_locs",
           "assign_req_to_token_pool", "fill_accept_out_cache_loc", "fill_bonus_tokens", "filter_finished_cache_loc",
           "generate_draft_decode_kv_indices", "get_target_cache_loc"]  # fmt: skip

_RANGE_COPY = ("req_pool_indices", "req_to_token", "start_offset", "end_offset", "out_cache_loc", "pool_len",
               "bs_upper")  # fmt: skip
ASSIGN_REQ = (Layout("0.5.14 cache_locs.py:16 / 0.5.15 :17", _RANGE_COPY),)
ASSIGN_EXTEND = (Layout("0.5.14 cache_locs.py:303 / 0.5.15 :304", _RANGE_COPY),)
ASSIGN_DRAFT = (Layout("0.5.14 cache_locs.py:70 / 0.5.15 :71",
                       ("req_pool_indices", "req_to_token", "seq_lens", "out_cache_loc", "pool_len", "topk",
                        "speculative_num_steps")),)  # fmt: skip
DRAFT_KV_INDICES = (Layout("0.5.14 cache_locs.py:97 / 0.5.15 :98",
                           ("req_pool_indices", "req_to_token", "paged_kernel_lens", "kv_indices", "kv_indptr",
                            "positions", "pool_len", "kv_indices_stride", "kv_indptr_stride", "bs_upper",
                            "iter_upper", "num_tokens_upper", "page_size")),)  # fmt: skip
ALIGN_EVICT = (Layout("0.5.14 cache_locs.py:178 / 0.5.15 :179",
                      ("seq_lens", "evict_mask", "page_size", "num_draft_tokens", "BLOCK_SIZE")),)  # fmt: skip
TARGET_CACHE_LOC = (Layout("0.5.14 cache_locs.py:225 / 0.5.15 :226",
                           ("tgt_cache_loc", "to_free_slots", "num_correct_drafts", "to_free_num_slots",
                            "out_cache_loc", "num_verify_tokens", "num_verify_tokens_upper", "bs_upper")),)
FILTER_FINISHED = (Layout("0.5.14 cache_locs.py:271 / 0.5.15 :272",
                          ("out_cache_loc", "tgt_cache_loc", "num_correct_drafts", "num_accept_tokens_filter",
                           "bs_upper", "num_verify_tokens_upper")),)  # fmt: skip
FILL_BONUS = (Layout("0.5.14/0.5.15 eagle.py:6",
                     ("accept_tokens", "accept_lens", "bonus_tokens_ptr", "accept_stride")),)
FILL_ACCEPT_LOC = (Layout("0.5.14/0.5.15 eagle.py:25",
                          ("accept_index", "out_cache_loc", "accept_out_cache_loc", "size_upper")),)


def _pool_row(a: dict[str, Any], pid: int) -> torch.Tensor:
    """The request's row of ``req_to_token`` (``req_to_token + req * pool_len``)."""
    pool_len = as_int(a["pool_len"])
    req = as_int(a["req_pool_indices"][pid])
    return a["req_to_token"].reshape(-1)[req * pool_len:(req + 1) * pool_len]


def _ranges(a: dict[str, Any], pid: int) -> tuple[int, int, int]:
    starts, ends = a["start_offset"].to(torch.int64), a["end_offset"].to(torch.int64)
    return int(starts[pid]), int(ends[pid]), int((ends[:pid] - starts[:pid]).sum())


@register("triton.assign_req_to_token_pool")
def assign_req_to_token_pool(grid: Any, *args: Any, **kwargs: Any) -> None:
    a = bind("assign_req_to_token_pool", ASSIGN_REQ, args, kwargs)
    for pid in range(grid_of(grid, a)[0]):
        start, end, cum = _ranges(a, pid)
        if end > start:
            row = _pool_row(a, pid)
            row[start:end] = a["out_cache_loc"][cum:cum + end - start].to(row.dtype)


@register("triton.assign_extend_cache_locs")
def assign_extend_cache_locs(grid: Any, *args: Any, **kwargs: Any) -> None:
    a = bind("assign_extend_cache_locs", ASSIGN_EXTEND, args, kwargs)
    out = a["out_cache_loc"]
    for pid in range(grid_of(grid, a)[0]):
        start, end, cum = _ranges(a, pid)
        if end > start:
            out[cum:cum + end - start] = _pool_row(a, pid)[start:end].to(out.dtype)


@register("triton.assign_draft_cache_locs_contiguous")
def assign_draft_cache_locs_contiguous(grid: Any, *args: Any, **kwargs: Any) -> None:
    a = bind("assign_draft_cache_locs_contiguous", ASSIGN_DRAFT, args, kwargs)
    length = as_int(a["topk"]) * as_int(a["speculative_num_steps"])
    out = a["out_cache_loc"]
    for pid in range(grid_of(grid, a)[0]):
        start = as_int(a["seq_lens"][pid])
        out[pid * length:(pid + 1) * length] = _pool_row(a, pid)[start:start + length].to(out.dtype)


@register("triton.generate_draft_decode_kv_indices")
def generate_draft_decode_kv_indices(grid: Any, *args: Any, **kwargs: Any) -> None:
    a = bind("generate_draft_decode_kv_indices", DRAFT_KV_INDICES, args, kwargs)
    num_steps, num_seqs, topk = grid_of(grid, a)[:3]
    lens = a["paged_kernel_lens"].to(torch.int64)
    page_size = as_int(a["page_size"])
    indices_flat, indptr_flat = a["kv_indices"].reshape(-1), a["kv_indptr"].reshape(-1)
    positions = a["positions"].to(torch.int64)
    for step in range(num_steps):
        indices = indices_flat[step * as_int(a["kv_indices_stride"]):]
        indptr = indptr_flat[step * as_int(a["kv_indptr_stride"]):]
        iters = step + 1
        for bid in range(num_seqs):
            seq_len, cum = int(lens[bid]), int(lens[:bid].sum())
            row = _pool_row(a, bid)
            for topk_id in range(topk):
                offset = cum * topk + bid * iters * topk + topk_id * (seq_len + iters)
                indices[offset:offset + seq_len] = row[:seq_len].to(indices.dtype)
                if page_size == 1 or topk == 1:
                    start = seq_len + topk_id * num_steps
                else:
                    last_page_len = seq_len % page_size
                    new_pages = (last_page_len + num_steps + page_size - 1) // page_size
                    start = seq_len // page_size * page_size + topk_id * new_pages * page_size + last_page_len
                indices[offset + seq_len:offset + seq_len + iters] = row[start:start + iters].to(indices.dtype)
                zid = bid * topk + topk_id
                if zid == 0:
                    zid = num_seqs * topk
                indptr[zid] = int(positions[:zid].sum()) + zid * iters


@register("triton.align_evict_mask_to_page_size")
def align_evict_mask_to_page_size(grid: Any, *args: Any, **kwargs: Any) -> None:
    a = bind("align_evict_mask_to_page_size", ALIGN_EVICT, args, kwargs)
    page_size, draft = as_int(a["page_size"]), as_int(a["num_draft_tokens"])
    mask = a["evict_mask"].reshape(-1)
    for bid in range(grid_of(grid, a)[0]):
        seq_len = as_int(a["seq_lens"][bid])
        row = mask[bid * draft:(bid + 1) * draft]
        num_false = draft - int(row.to(torch.int64).sum())
        start = (seq_len + num_false - 1) // page_size * page_size - seq_len
        for i in range(max(start, 0), min(start + page_size, draft)):
            row[i] = False


@register("triton.get_target_cache_loc")
def get_target_cache_loc(grid: Any, *args: Any, **kwargs: Any) -> None:
    a = bind("get_target_cache_loc", TARGET_CACHE_LOC, args, kwargs)
    verify = as_int(a["num_verify_tokens"])
    correct = a["num_correct_drafts"].to(torch.int64)
    to_free = a["to_free_num_slots"].to(torch.int64)
    out_cache_loc, tgt, freed = a["out_cache_loc"], a["tgt_cache_loc"], a["to_free_slots"]
    for bid in range(grid_of(grid, a)[0]):
        row = out_cache_loc[bid * verify:(bid + 1) * verify]
        keep_start, keep = int(correct[:bid].sum()) + bid, int(correct[bid]) + 1
        tgt[keep_start:keep_start + keep] = row[:keep].to(tgt.dtype)
        free_start, free = int(to_free[:bid].sum()), int(to_free[bid])
        if free > 0:
            freed[free_start:free_start + free] = row[verify - free:].to(freed.dtype)


@register("triton.filter_finished_cache_loc_kernel")
def filter_finished_cache_loc(grid: Any, *args: Any, **kwargs: Any) -> None:
    a = bind("filter_finished_cache_loc_kernel", FILTER_FINISHED, args, kwargs)
    correct = a["num_correct_drafts"].to(torch.int64)
    keep = a["num_accept_tokens_filter"].to(torch.int64)
    out, tgt = a["out_cache_loc"], a["tgt_cache_loc"]
    for bid in range(grid_of(grid, a)[0]):
        old_start, new_start, length = int(correct[:bid].sum()) + bid, int(keep[:bid].sum()), int(keep[bid])
        out[new_start:new_start + length] = tgt[old_start:old_start + length].to(out.dtype)


@register("triton.fill_bonus_tokens")
def fill_bonus_tokens(grid: Any, *args: Any, **kwargs: Any) -> None:
    """``bonus[i] = accept_tokens[i * stride + accept_lens[i] - 1]`` (the last accepted token)."""
    a = bind("fill_bonus_tokens", FILL_BONUS, args, kwargs)
    stride, tokens, bonus = as_int(a["accept_stride"]), a["accept_tokens"].reshape(-1), a["bonus_tokens_ptr"]
    for pid in range(grid_of(grid, a)[0]):
        bonus[pid] = tokens[stride * pid + as_int(a["accept_lens"][pid]) - 1]


@register("triton.fill_accept_out_cache_loc")
def fill_accept_out_cache_loc(grid: Any, *args: Any, **kwargs: Any) -> None:
    """Compact ``out_cache_loc[accept_index[i]]`` for the accepted (``!= -1``) entries, in order."""
    a = bind("fill_accept_out_cache_loc", FILL_ACCEPT_LOC, args, kwargs)
    index = a["accept_index"].reshape(-1).to(torch.int64)
    out, dst = a["out_cache_loc"], a["accept_out_cache_loc"]
    for pid in range(grid_of(grid, a)[0]):
        src = int(index[pid])
        if src > -1:
            dst[int((index[:pid] != -1).sum())] = out[src]
