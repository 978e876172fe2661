"""Plain-torch ports of sgl_kernel's speculative tree ops, ``build_tree_kernel_efficient`` and ``verify_tree_greedy``.

SGLang 0.5.14/0.5.15 call them on CUDA/HIP/MUSA only (``srt/speculative/eagle_utils.py:25-28, 197, 232`` in
0.5.14; ``:52-55, 247, 364`` in 0.5.15); a CPU build reaches them through the CPU-gap switch
(``sglang_cpu_gaps``). The CUDA source is not in SGLang's wheel; its semantics are those of SGLang's own triton
rewrite of both ops, 0.5.15 ``srt/speculative/triton_ops/spec_tree.py:19-174`` (``sgl_build_tree_kernel_
efficient_triton``) and ``:177-281`` (``verify_tree_greedy_kernel_triton``), ported here per request:

- build: for each draft token i (from last to first) its parent's position among the selected tokens
  (``selected_index // topk`` -> ``parent_list``), linked as first child (``retrieve_next_token``) with the
  previous first child as its sibling (``retrieve_next_sibling``); ``retrieve_index = b * draft + i``; each
  token's mask row sees the prefix, itself and its ancestors; its position is ``seq_len + depth``.
- verify (greedy): from the root, follow the child whose draft token equals the target's prediction at the
  last accepted node, level by level; ``predicts[node] = target``, ``accept_index`` the accepted nodes,
  ``accept_token_num`` their count (without the root).
"""

from __future__ import annotations

from typing import Any

import torch

from sglang_cpu_ports import register

__all__ = ["build_tree", "verify_tree_greedy"]

FULL_MASK = 0  # TreeMaskMode.FULL_MASK (eagle_utils.py); the other modes index the mask by draft tokens only


def _parent_position(selected: list[int], parents: list[int], topk: int, position: int, draft: int) -> int | None:
    """Where the parent of selected token ``position`` sits among the selected tokens (+1; 0 is the root)."""
    parent_tb = selected[position] // topk
    if parent_tb == 0:
        return 0
    parent_token = parents[parent_tb]
    for pp in range(draft - 1):
        if selected[pp] == parent_token:
            return pp + 1
    return None


def build_tree(parent_list: torch.Tensor, selected_index: torch.Tensor, verified_seq_len: torch.Tensor,
               tree_mask: torch.Tensor, positions: torch.Tensor, retrieve_index: torch.Tensor,
               retrieve_next_token: torch.Tensor, retrieve_next_sibling: torch.Tensor, topk: int, depth: int,
               draft_token_num: int, tree_mask_mode: int = FULL_MASK) -> None:  # fmt: skip
    topk, depth, draft, mode = int(topk), int(depth), int(draft_token_num), int(tree_mask_mode)
    seq_lens = [int(x) for x in verified_seq_len.tolist()]
    mask = tree_mask.reshape(-1)
    next_token, next_sibling = retrieve_next_token.reshape(-1), retrieve_next_sibling.reshape(-1)
    prefix_sum = 0
    for b, seq_len in enumerate(seq_lens):
        selected = [int(x) for x in selected_index[b].tolist()]
        parents = [int(x) for x in parent_list[b].tolist()] if parent_list.numel() else []
        seq_tree_idx = draft * draft * b + prefix_sum * draft
        positions[b * draft] = seq_len
        for i in range(draft - 1, 0, -1):
            retrieve_index.reshape(-1)[b * draft + i] = b * draft + i
            parent = _parent_position(selected, parents, topk, i - 1, draft)
            if parent is not None:
                first = int(next_token[b * draft + parent])
                next_token[b * draft + parent] = i
                if first != -1:
                    next_sibling[b * draft + i] = first
        retrieve_index.reshape(-1)[b * draft] = b * draft
        for token in range(draft):
            if mode == FULL_MASK:
                row = seq_tree_idx + (seq_len + draft) * token + seq_len + 1
            else:
                row = draft * draft * b + draft * token + 1
            mask[row - 1] = True
            mask[row:row + draft - 1] = False
            if token == 0:
                continue
            current, level = token - 1, 0
            for _ in range(depth):
                level += 1
                mask[row + current] = True
                parent_tb = selected[current] // topk
                if parent_tb == 0:
                    break
                parent_token = parents[parent_tb]
                found = next((cp for cp in range(draft - 1) if selected[cp] == parent_token), None)
                if found is None:
                    break
                current = found
            positions[b * draft + token] = level + seq_len
        prefix_sum += seq_len


def verify_tree_greedy(predicts: torch.Tensor, accept_index: torch.Tensor, accept_token_num: torch.Tensor,
                       candidates: torch.Tensor, retrive_index: torch.Tensor, retrive_next_token: torch.Tensor,
                       retrive_next_sibling: torch.Tensor, target_predict: torch.Tensor) -> None:  # fmt: skip
    batch, num_spec = accept_index.shape[0], accept_index.shape[1]
    candidates.shape[1]
    targets = target_predict.reshape(-1)
    for b in range(batch):
        last = int(retrive_index[b, 0])
        accept_index[b, 0] = last
        accepted, cur = 0, 0
        for _j in range(1, num_spec):
            cur = int(retrive_next_token[b, cur])
            target = int(targets[last])
            matched = False
            while cur != -1:
                if int(candidates[b, cur]) == target:
                    predicts[last] = target
                    accepted += 1
                    accept_index[b, accepted] = int(retrive_index[b, cur])
                    last = int(retrive_index[b, cur])
                    matched = True
                    break
                cur = int(retrive_next_sibling[b, cur])
            if not matched:
                break
        accept_token_num[b] = accepted
        predicts[last] = targets[last]


@register("sgl_kernel.build_tree_kernel_efficient")
def build_tree_kernel_efficient(*args: Any, **kwargs: Any) -> None:
    """sgl_kernel's op, called positionally by eagle_utils (same parameter order as :func:`build_tree`)."""
    build_tree(*args, **kwargs)


@register("sgl_kernel.verify_tree_greedy")
def verify_tree_greedy_op(*args: Any, **kwargs: Any) -> None:
    """sgl_kernel's op, called with keywords (``retrive_*`` spelled as sgl_kernel spells them)."""
    verify_tree_greedy(*args, **kwargs)
