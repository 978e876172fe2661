"""A tiny Gemma-4-like transformer over paged KV, and the Frozen-KV MTP draft head that reads its KV.

Attention runs per sequence span: a span's queries see the request's cached prefix (gathered from
the KV pool through ``req_to_token``) plus its own new tokens, causally; sliding-window layers see
only the last ``sliding_window`` positions. Input ids are reduced modulo the vocabulary (a hashed
embedding), so any non-negative id is valid.

The draft never writes KV: at each step it recomputes its drafted tokens on top of the target's
cached prefix, and mixes the target's view with its own head. ``agreement`` is the mixing weight,
so how often its guess matches the target emerges from tensors, not from a configured rate.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from harness.sim.forward_batch import SeqSpan
from harness.sim.memory_pool import DraftKVView, KVPool
from harness.sim.model_config import TinyConfig

__all__ = ["TinyTransformer", "FrozenKVDraftHead"]


def _rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight


def _zscore(x: torch.Tensor) -> torch.Tensor:
    return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-6)


class TinyTransformer:
    """Target model: seeded random weights (``--load-format dummy`` style), tied embeddings like Gemma."""

    def __init__(self, config: TinyConfig, seed: int, device: torch.device) -> None:
        self.config = config
        self.device = device
        g = torch.Generator().manual_seed(seed)
        h, nh, hd, ff = config.hidden_size, config.num_attention_heads, config.head_dim, config.intermediate_size

        def w(*shape: int, scale: float) -> torch.Tensor:
            return (torch.randn(*shape, generator=g) * scale).to(device)

        self.embed = w(config.vocab_size, h, scale=1.0)
        self.layers = [
            {
                "ln1": torch.ones(h, device=device), "ln2": torch.ones(h, device=device),
                "wq": w(h, nh * hd, scale=h ** -0.5), "wk": w(h, nh * hd, scale=h ** -0.5),
                "wv": w(h, nh * hd, scale=h ** -0.5), "wo": w(nh * hd, h, scale=(nh * hd) ** -0.5),
                "w1": w(h, ff, scale=h ** -0.5), "w2": w(ff, h, scale=ff ** -0.5),
            }
            for _ in range(config.num_layers)
        ]
        self.final_norm = torch.ones(h, device=device)
        # Untied head: with tied embeddings a random model mostly echoes its last input token.
        self.lm_head = w(h, config.vocab_size, scale=h ** -0.5 * 4.0)
        half = hd // 2
        self._inv_freq = (1.0 / (10000 ** (torch.arange(half, dtype=torch.float32) / half))).to(device)

    def _attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor,
                spans: list[SeqSpan], pool: KVPool | DraftKVView, req_to_token: torch.Tensor) -> torch.Tensor:
        cfg = self.config
        sliding = cfg.layer_types[layer] == "sliding_attention"
        out = torch.empty_like(q)
        for span in spans:
            sl = slice(span.start, span.start + span.length)
            prefix = req_to_token[span.req_pool_idx, : span.prefix_len]
            keys = torch.cat([pool.k[layer][prefix], k[sl]])
            vals = torch.cat([pool.v[layer][prefix], v[sl]])
            kpos = torch.cat([torch.arange(span.prefix_len, device=self.device), positions[sl]])
            qpos = positions[sl]
            mask = kpos[None, :] <= qpos[:, None]
            if sliding:
                mask &= (qpos[:, None] - kpos[None, :]) < cfg.sliding_window
            scores = torch.einsum("qhd,khd->hqk", q[sl], keys) * cfg.head_dim ** -0.5
            scores = scores.masked_fill(~mask[None], float("-inf"))
            out[sl] = torch.einsum("hqk,khd->qhd", scores.softmax(-1), vals)
        return out

    def hidden_states(self, input_ids: torch.Tensor, positions: torch.Tensor, spans: list[SeqSpan],
                      pool: KVPool | DraftKVView, req_to_token: torch.Tensor,
                      write_slots: torch.Tensor | None) -> torch.Tensor:
        """Final hidden state of every new token; writes their KV to ``write_slots`` unless it is None."""
        cfg = self.config
        nh, hd = cfg.num_attention_heads, cfg.head_dim
        x = self.embed[input_ids.remainder(cfg.vocab_size)]
        for i, p in enumerate(self.layers):
            y = _rms_norm(x, p["ln1"])
            q = self._rope((y @ p["wq"]).view(-1, nh, hd), positions)
            k = self._rope((y @ p["wk"]).view(-1, nh, hd), positions)
            v = (y @ p["wv"]).view(-1, nh, hd)
            if write_slots is not None:
                assert isinstance(pool, KVPool), "only the target writes KV"
                pool.write(i, write_slots, k, v)
            a = self._attend(i, q, k, v, positions, spans, pool, req_to_token)
            x = x + a.reshape(-1, nh * hd) @ p["wo"]
            x = x + F.gelu(_rms_norm(x, p["ln2"]) @ p["w1"]) @ p["w2"]
        return _rms_norm(x, self.final_norm)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden @ self.lm_head

    def _rope(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        angles = positions.to(torch.float32)[:, None] * self._inv_freq[None, :]
        cos, sin = angles.cos()[:, None, :], angles.sin()[:, None, :]
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class FrozenKVDraftHead:
    """The assistant draft: the target's view of the context (read-only KV) mixed with its own head."""

    def __init__(self, target: TinyTransformer, config: TinyConfig, agreement: float, seed: int) -> None:
        self.target = target
        self.config = config
        self.agreement = agreement
        g = torch.Generator().manual_seed(seed + 7919)
        h = target.config.hidden_size
        self.own_head = (torch.randn(h, target.config.vocab_size, generator=g) * h ** -0.5).to(target.device)

    def logits(self, history: torch.Tensor, base_positions: torch.Tensor, rows: list[tuple[int, int]],
               pool: KVPool | DraftKVView, req_to_token: torch.Tensor) -> torch.Tensor:
        """Next-token logits per row; ``history[r]`` are the row's tokens after its cached prefix.

        ``rows[r]`` is ``(req_pool_idx, prefix_len)``. No KV is written (write_slots=None).
        """
        n_rows, width = history.shape
        spans = [SeqSpan(start=r * width, length=width, req_pool_idx=idx, prefix_len=plen)
                 for r, (idx, plen) in enumerate(rows)]
        positions = (base_positions[:, None] + torch.arange(width, device=history.device)[None, :]).reshape(-1)
        hidden = self.target.hidden_states(history.reshape(-1), positions, spans, pool, req_to_token, None)
        last = hidden.view(n_rows, width, -1)[:, -1]
        mixed = self.agreement * _zscore(self.target.logits(last)) + (1.0 - self.agreement) * _zscore(last @ self.own_head)
        return mixed
