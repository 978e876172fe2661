"""Token choice from logits: greedy at temperature 0, otherwise seeded sampling per request."""

from __future__ import annotations

import torch

__all__ = ["sample"]


def sample(logits: torch.Tensor, temperature: float, generator: torch.Generator | None) -> torch.Tensor:
    """One token per row of ``logits`` (shape ``[n, vocab]``)."""
    if temperature <= 0.0:
        return logits.argmax(-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    return torch.multinomial(probs.cpu(), 1, generator=generator).view(-1).to(logits.device)
