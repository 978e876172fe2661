"""Plain-torch ports of ``sgl_kernel``'s CPU attention ops, as SGLang's ``intel_amx`` backend calls them.

``torch.ops.sgl_kernel.decode_attention_cpu`` and ``extend_attention_cpu`` (0.5.21
``srt/layers/attention/intel_amx_backend.py:57-58``, called at :254-277 and :329-349). Their arguments, in the
order the backend passes them, and what they mean here (the semantics of SGLang's triton reference kernels
``decode_attention_fwd``/``extend_attention_fwd`` for the same batch):

- K/V of a request are the rows ``req_to_token[req_pool_indices[i], :seq_lens[i]]`` of the layer's buffers;
- decode: the new token's K/V (when given) are written at ``loc`` first (the kernel stores them in-kernel),
  then one query per request attends to all ``seq_lens[i]`` keys;
- extend: ``seq_lens[i]`` counts prefix and extend tokens; query ``j`` of the ``extend_seq_lens[i]`` new ones
  (rows from ``extend_start_loc[i]``) sees the whole prefix and, causally, extend tokens ``<= j`` (all of them
  when not ``is_causal``), or where a ``tree_mask`` is given (speculative verify, ``TreeMaskMode.QLEN_ONLY`` on
  the CPU: ``srt/speculative/eagle_utils.py:151``) the extend tokens its row of that request's
  ``[n, n]`` boolean block allows; the extend K/V come from ``k_extend``/``v_extend`` when given, else
  from the buffers (Gemma-4's KV-shared layers);
- ``sliding_window_plus_one`` > 0 keeps keys with ``query position - key position < sliding_window_plus_one``;
- ``logit_cap`` > 0 caps scores to ``cap * tanh(score / cap)``; ``sinks`` (one logit per head) join the
  softmax's denominator; ``k_scale``/``v_scale`` scale the cached K and V (1.0 unless an fp8 cache).

Cross-attention (``is_cross_attention``) is not ported and raises. ``attn_logits`` is the C++ kernel's split
scratch buffer, unused. These are for correctness on a CPU, never speed.
"""

from __future__ import annotations

from typing import Any

import torch

from sglang_cpu_ports import register

__all__ = ["attend", "decode_attention_cpu", "extend_attention_cpu"]


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, visible: torch.Tensor, sm_scale: float, logit_cap: float,
           sinks: torch.Tensor | None) -> torch.Tensor:
    """Softmax attention of queries ``q [m, H, D]`` over keys ``k [n, Hkv, D]``/values ``v [n, Hkv, Dv]``.

    ``visible [m, n]`` says which key each query may see; grouped-query heads share a KV head. Float32 inside.
    """
    heads, kv_heads = q.shape[1], k.shape[1]
    group = heads // kv_heads
    qf = q.float().transpose(0, 1)  # [H, m, D]
    kf = k.float().repeat_interleave(group, dim=1).transpose(0, 1)  # [H, n, D]
    vf = v.float().repeat_interleave(group, dim=1).transpose(0, 1)  # [H, n, Dv]
    scores = torch.matmul(qf, kf.transpose(1, 2)) * sm_scale  # [H, m, n]
    if logit_cap and logit_cap > 0:
        scores = logit_cap * torch.tanh(scores / logit_cap)
    scores = scores.masked_fill(~visible.unsqueeze(0), float("-inf"))
    if sinks is not None:
        sink = sinks.float().view(heads, 1, 1).expand(heads, scores.shape[1], 1)
        weights = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]
    else:
        weights = torch.softmax(scores, dim=-1)
    weights = torch.nan_to_num(weights, nan=0.0)  # a query that sees nothing gets zeros, not NaN
    return torch.matmul(weights, vf).transpose(0, 1)  # [m, H, Dv]


def _window(visible: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor, window_plus_one: int) -> torch.Tensor:
    if window_plus_one and window_plus_one > 0:
        visible = visible & ((q_pos[:, None] - k_pos[None, :]) < window_plus_one)
    return visible


@register("sgl_kernel.decode_attention_cpu")
def decode_attention_cpu(query: torch.Tensor, k_buffer: torch.Tensor, v_buffer: torch.Tensor, k_scale: float,
                         v_scale: float, output: torch.Tensor, key: torch.Tensor | None, value: torch.Tensor | None,
                         loc: torch.Tensor, attn_logits: torch.Tensor, req_to_token: torch.Tensor,
                         req_pool_indices: torch.Tensor, seq_lens: torch.Tensor, sm_scale: float, logit_cap: float,
                         is_cross_attention: bool = False, sliding_window_plus_one: int = 0, encoder_lens: Any = None,
                         sinks: torch.Tensor | None = None) -> None:
    """One query per request over its cached keys; writes ``output [bs, H, Dv]`` (see the module docstring)."""
    del attn_logits, encoder_lens
    if is_cross_attention:
        raise NotImplementedError("sgl_kernel.decode_attention_cpu: cross-attention has no plain-torch port")
    if key is not None and value is not None:
        k_buffer[loc] = key.view(-1, *k_buffer.shape[1:]).to(k_buffer.dtype)
        v_buffer[loc] = value.view(-1, *v_buffer.shape[1:]).to(v_buffer.dtype)
    for i, (row, seq_len) in enumerate(zip(req_pool_indices.tolist(), seq_lens.tolist(), strict=True)):
        slots = req_to_token[int(row), : int(seq_len)].long()
        k = k_buffer[slots].float() * k_scale
        v = v_buffer[slots].float() * v_scale
        positions = torch.arange(int(seq_len))
        visible = _window(torch.ones(1, int(seq_len), dtype=torch.bool), positions[-1:], positions, sliding_window_plus_one)
        out = attend(query[i : i + 1], k, v, visible, sm_scale, logit_cap, sinks)
        output[i : i + 1] = out.to(output.dtype)


@register("sgl_kernel.extend_attention_cpu")
def extend_attention_cpu(q_extend: torch.Tensor, k_extend: torch.Tensor | None, v_extend: torch.Tensor | None,
                         o_extend: torch.Tensor, k_buffer: torch.Tensor, v_buffer: torch.Tensor, k_scale: float,
                         v_scale: float, req_to_token: torch.Tensor, req_pool_indices: torch.Tensor, seq_lens: torch.Tensor,
                         extend_seq_lens: torch.Tensor, extend_start_loc: torch.Tensor, max_len_extend: Any,
                         sm_scale: float, logit_cap: float, is_cross_attention: bool = False,
                         sliding_window_plus_one: int = 0, encoder_lens: Any = None, sinks: torch.Tensor | None = None,
                         tree_mask: torch.Tensor | None = None, is_causal: bool = True) -> None:
    """The new tokens of each request over its prefix and themselves; writes ``o_extend`` (module docstring)."""
    del max_len_extend, encoder_lens
    if is_cross_attention:
        raise NotImplementedError("sgl_kernel.extend_attention_cpu: cross-attention has no plain-torch port")
    mask_offset = 0
    for i, (row, seq_len, ext, start) in enumerate(zip(req_pool_indices.tolist(), seq_lens.tolist(),
                                                        extend_seq_lens.tolist(), extend_start_loc.tolist(), strict=True)):
        del i
        seq_len, ext, start = int(seq_len), int(ext), int(start)
        if ext == 0:
            continue
        prefix = seq_len - ext
        slots = req_to_token[int(row), :seq_len].long()
        k = k_buffer[slots].float() * k_scale
        v = v_buffer[slots].float() * v_scale
        if k_extend is not None and v_extend is not None:
            k[prefix:] = k_extend[start : start + ext].float()
            v[prefix:] = v_extend[start : start + ext].float()
        visible = torch.ones(ext, seq_len, dtype=torch.bool)
        if tree_mask is not None:
            block = tree_mask.view(-1)[mask_offset : mask_offset + ext * ext].view(ext, ext).bool()
            visible[:, prefix:] = block
            mask_offset += ext * ext
        elif is_causal:
            visible[:, prefix:] = torch.ones(ext, ext, dtype=torch.bool).tril()
        q_pos = torch.arange(prefix, seq_len)
        visible = _window(visible, q_pos, torch.arange(seq_len), sliding_window_plus_one)
        out = attend(q_extend[start : start + ext], k, v, visible, sm_scale, logit_cap, sinks)
        o_extend[start : start + ext] = out.to(o_extend.dtype)
