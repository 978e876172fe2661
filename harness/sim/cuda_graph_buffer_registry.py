"""Static decode buffers sized to the largest decode batch, and ``fill_from`` as SGLang's registry has it.

``fill_from`` copies every forward-batch field that is not None into its buffer sliced to the
decode batch (``buffer[:bs]``) with one grouped ``torch._foreach_copy_``. A field longer than the
batch (the prefill's ``out_cache_loc``) makes PyTorch raise
``output with shape [bs] doesn't match the broadcast shape [N]``: the mechanism of sglang#28264.
"""

from __future__ import annotations

import torch

from harness.sim.forward_batch import ForwardBatch

__all__ = ["CudaGraphBufferRegistry", "BUFFER_FIELDS"]

BUFFER_FIELDS = ("input_ids", "positions", "seq_lens", "req_pool_indices", "out_cache_loc")


def _grouped_foreach_copy_(dsts: list[torch.Tensor], srcs: list[torch.Tensor]) -> None:
    # One fused launch on a GPU; on CPU the same op raises the same shape error.
    torch._foreach_copy_(dsts, srcs)


class CudaGraphBufferRegistry:
    """One int64 buffer per field, ``max_bs`` long."""

    def __init__(self, max_bs: int, device: torch.device) -> None:
        self.max_bs = max_bs
        self.buffers = {name: torch.zeros(max_bs, dtype=torch.int64, device=device) for name in BUFFER_FIELDS}

    def fill_from(self, forward_batch: ForwardBatch, bs: int) -> dict[str, torch.Tensor | None]:
        """Copy the batch's fields into ``buffer[:bs]``; None fields are skipped (and stay None in the view)."""
        dsts: list[torch.Tensor] = []
        srcs: list[torch.Tensor] = []
        view: dict[str, torch.Tensor | None] = {}
        for name in BUFFER_FIELDS:
            src = getattr(forward_batch, name)
            if src is None:
                view[name] = None
                continue
            dst = self.buffers[name][:bs]
            dsts.append(dst)
            srcs.append(src)
            view[name] = dst
        _grouped_foreach_copy_(dsts, srcs)
        return view
