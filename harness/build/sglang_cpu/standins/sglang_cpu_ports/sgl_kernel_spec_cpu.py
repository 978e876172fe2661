"""The CPU names of ``sgl_kernel``'s speculative-tree ops that 0.5.21 calls, and NGRAM's tree-mask reader.

0.5.21 has a CPU branch of its own: it imports ``build_tree_kernel_efficient_cpu`` and ``verify_tree_greedy_cpu``
(``srt/speculative/eagle_utils.py:60-64``, called at :259 and :410) with the arguments of the GPU ops, so they are
the ports of :mod:`sglang_cpu_ports.sgl_kernel_spec_tree` under their CPU names. NGRAM imports
``sgl_kernel.speculative.reconstruct_indices_from_tree_mask`` on the CPU (``srt/speculative/ngram_worker.py:46``),
ported here from ``_reconstruct_tree_mask_kernel`` (``kernels/ops/speculative/reconstruct_tree.py:48``), whose
docstring (:19-31) states the op's contract:

- ``ancestors[i, j] = tree_mask[b, i, j] and j < i``; ``positions = #ancestors + verified_seq_len[b]``;
- ``retrieve_index = b * n + i``; ``parent[i]`` = the largest ancestor, else -1;
- ``retrieve_next_token[i]`` = the smallest ``k > i`` with ``i`` among its ancestors, else -1 (first child);
- ``retrieve_next_sibling[i]`` = the smallest ``k > i`` with the same parent, else -1 (and -1 for a root).
"""

from __future__ import annotations

from typing import Any

import torch

from sglang_cpu_ports import register
from sglang_cpu_ports.sgl_kernel_spec_tree import build_tree, verify_tree_greedy

__all__ = ["build_tree_kernel_efficient_cpu", "reconstruct_indices_from_tree_mask", "verify_tree_greedy_cpu"]


@register("sgl_kernel.build_tree_kernel_efficient_cpu")
def build_tree_kernel_efficient_cpu(*args: Any, **kwargs: Any) -> None:
    build_tree(*args, **kwargs)


@register("sgl_kernel.verify_tree_greedy_cpu")
def verify_tree_greedy_cpu(*args: Any, **kwargs: Any) -> None:
    verify_tree_greedy(*args, **kwargs)


@register("sgl_kernel.reconstruct_indices_from_tree_mask")
def reconstruct_indices_from_tree_mask(tree_mask: torch.Tensor, verified_seq_len: torch.Tensor, positions: torch.Tensor,
                                       retrive_index: torch.Tensor, retrive_next_token: torch.Tensor,
                                       retrive_next_sibling: torch.Tensor, batch_size: int, draft_token_num: int) -> None:
    """NGRAM's verify metadata from its ``[bs, n, n]`` ancestor masks, written in place."""
    n, batch = int(draft_token_num), int(batch_size)
    if batch == 0:
        return
    masks = tree_mask.reshape(-1)[: batch * n * n].view(batch, n, n).bool()
    columns = torch.arange(n)
    below = columns[None, :] < columns[:, None]  # [i, j]: j < i
    none = torch.full((n, n), -1, dtype=torch.long)
    far = torch.full((n, n), n, dtype=torch.long)
    for b in range(batch):
        ancestors = masks[b] & below
        parent = torch.where(ancestors, columns[None, :].expand(n, n), none).max(dim=1).values
        first_child = torch.where(ancestors, columns[:, None].expand(n, n), far).min(dim=0).values
        next_token = torch.where(ancestors.any(dim=0), first_child, torch.full_like(first_child, -1))
        same_parent = (parent[:, None] == parent[None, :]) & below  # [k, tid]: k > tid, same parent
        first_sibling = torch.where(same_parent, columns[:, None].expand(n, n), far).min(dim=0).values
        next_sibling = torch.where((parent >= 0) & (first_sibling < n), first_sibling, torch.full_like(first_sibling, -1))
        out = slice(b * n, (b + 1) * n)
        positions.view(-1)[out] = (ancestors.sum(dim=1) + int(verified_seq_len[b])).to(positions.dtype)
        retrive_index.view(-1)[out] = (b * n + columns).to(retrive_index.dtype)
        retrive_next_token.view(-1)[out] = next_token.to(retrive_next_token.dtype)
        retrive_next_sibling.view(-1)[out] = next_sibling.to(retrive_next_sibling.dtype)
