"""What the triton ports share: naming a launch's arguments, reading constexprs, pointer arithmetic as views.

A port is called as ``port(grid, *args, **kwargs)`` exactly as SGLang launched the kernel. Kernels take most
arguments positionally and their parameter lists change between releases (0.5.15's extend kernel gained
``LSE_Extend``, ``stride_lse_*`` and page strides), so each port names the launch's arguments with the layout
of the release that launched it: :func:`bind` picks the one layout the launch fills exactly, and refuses a
launch no layout fits (naming the kernel) rather than computing with misplaced arguments.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

# Options of the launch itself (triton's, AMD's, PDL), never kernel parameters.
_LAUNCH_OPTIONS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg", "waves_per_eu", "matrix_instr_nonkdim",
                             "kpack", "launch_pdl", "enable_fp_fusion", "debug"})  # fmt: skip

__all__ = ["Layout", "as_int", "bind", "constexpr_value", "flat", "gather_heads", "grid_of", "int64_at", "raw_bytes", "strided"]


@dataclass(frozen=True)
class Layout:
    """One release family's parameter list of a kernel (positional names in order)."""

    releases: str  # where it was read, e.g. "0.5.14 extend_attention.py:240-290"
    names: tuple[str, ...]  # every parameter, in the kernel's order
    defaults: tuple[tuple[str, Any], ...] = ()  # parameters with a default in the kernel's signature


def constexpr_value(value: Any) -> Any:
    """A ``tl.constexpr(x)`` object (SGLang keeps some module-level) stands for ``x``."""
    if type(value).__name__ == "constexpr" and hasattr(value, "value"):
        return value.value
    return value


def as_int(value: Any) -> int:
    value = constexpr_value(value)
    if isinstance(value, torch.Tensor):
        return int(value.item())
    return int(value)


def bind(kernel: str, layouts: Sequence[Layout], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The launch's arguments by parameter name, under the one layout that fits it exactly.

    A layout fits when the positional arguments and the keywords (launch options such as ``num_warps`` aside)
    fill each of its parameters once, and every parameter without a default is given.
    """
    given = {name for name in kwargs if name not in _LAUNCH_OPTIONS}
    for layout in layouts:
        if len(args) > len(layout.names):
            continue
        positional = set(layout.names[: len(args)])
        if positional & given or not given <= set(layout.names):
            continue
        defaults = dict(layout.defaults)
        if any(name not in positional and name not in given and name not in defaults for name in layout.names):
            continue
        named = {**defaults, **dict(zip(layout.names, args, strict=False)), **kwargs}
        return {name: constexpr_value(value) for name, value in named.items()}
    raise NotImplementedError(
        f"triton kernel {kernel!r}: no known parameter layout takes {len(args)} positional arguments and "
        f"keywords {sorted(given)} (known: {'; '.join(layout.releases for layout in layouts)})")


def grid_of(grid: Any, meta: dict[str, Any]) -> tuple[int, ...]:
    """The launch grid as a tuple of ints (triton accepts a tuple or a callable of the launch's META)."""
    if callable(grid):
        grid = grid(meta)
    if not isinstance(grid, (tuple, list)):
        grid = (grid,)
    return tuple(as_int(g) for g in grid)


def strided(base: torch.Tensor, sizes: Sequence[int], strides: Sequence[int]) -> torch.Tensor:
    """The elements a kernel reaches as ``base + i*strides[0] + j*strides[1] + ...`` (triton pointer arithmetic)."""
    return torch.as_strided(base, tuple(int(s) for s in sizes), tuple(int(s) for s in strides), base.storage_offset())


def raw_bytes(address: int, count: int) -> torch.Tensor:
    """The ``count`` bytes at a raw address, as a uint8 tensor sharing that memory (writes go through).

    Some kernels take tables of ``data_ptr()`` addresses and cast them to pointers; on CPU those are addresses
    in this process, and this is the same cast. The caller keeps the owning tensors alive, as for the kernel.
    """
    if count <= 0:
        return torch.empty(0, dtype=torch.uint8)
    return torch.frombuffer((ctypes.c_uint8 * int(count)).from_address(int(address)), dtype=torch.uint8)


def int64_at(address: int, count: int) -> torch.Tensor:
    """``count`` int64 values at a raw address, copied."""
    return raw_bytes(address, 8 * count).view(torch.int64).clone()


def flat(base: torch.Tensor, extent: int) -> torch.Tensor:
    """``base``'s memory from its first element on, as a 1-D tensor of ``extent`` elements (a raw pointer)."""
    return torch.as_strided(base, (int(extent),), (1,), base.storage_offset())


def gather_heads(base: torch.Tensor, row_offsets: torch.Tensor, head_stride: int, heads: int, dim: int) -> torch.Tensor:
    """``base[row_offsets[n] + h*head_stride + d]`` for every n, head h < heads, d < dim: shape [N, heads, dim]."""
    offsets = (row_offsets.to(torch.int64)[:, None, None] + torch.arange(heads)[None, :, None] * int(head_stride)
               + torch.arange(dim)[None, None, :])  # fmt: skip
    if offsets.numel() == 0:
        return torch.empty((row_offsets.shape[0], heads, dim), dtype=base.dtype)
    return flat(base, int(offsets.max()) + 1)[offsets]
