"""The stand-in's ``fill_from``: the reference server's shape rule for the static decode buffers, without tensors.

Named as harness.sim.cuda_graph_buffer_registry (and SGLang's file) so that the crash it raises has the frames
the catalogue's signature reads. A field of length N is copied into ``buffer[:bs]``: PyTorch broadcasts N == 1
and N == bs, and raises otherwise, with the messages checked against torch 2.13's ``_foreach_copy_``.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["fill_from"]


def _grouped_foreach_copy_(dst_lens: list[int], src_lens: list[int]) -> None:
    for bs, n in zip(dst_lens, src_lens):
        if n in (1, bs):
            continue
        if n > bs:
            raise RuntimeError(f"output with shape [{bs}] doesn't match the broadcast shape [{n}]")
        raise RuntimeError(f"The size of tensor a ({bs}) must match the size of tensor b ({n}) at non-singleton "
                           "dimension 0")


def fill_from(field_lens: Mapping[str, int | None], bs: int) -> None:
    """Copy each field that is not None into its ``bs``-long buffer; only the lengths matter here."""
    present = [n for n in field_lens.values() if n is not None]
    _grouped_foreach_copy_([bs] * len(present), present)
