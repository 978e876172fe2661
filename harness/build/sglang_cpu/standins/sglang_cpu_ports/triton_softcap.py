"""Plain-torch ports of the logit soft-capping kernels (``x -> cap * tanh(x / cap)``).

Sources: sglang 0.5.14 and 0.5.15 ``srt/layers/triton_ops/softcap.py:31`` (``softcap_out_kernel``: float32
output, tanh written as (e^2x - 1)/(e^2x + 1)) and ``:72`` (``softcap_inplace_logits_kernel``: in place, per row of
``row_stride`` elements, over the grid's column blocks).
"""

from __future__ import annotations

from typing import Any

import torch

from sglang_cpu_ports import register
from sglang_cpu_ports.triton_common import Layout, as_int, bind, flat, grid_of

__all__ = ["softcap_inplace_logits", "softcap_out"]

INPLACE = (Layout("0.5.14/0.5.15 layers/triton_ops/softcap.py:72",
                  ("full_logits_ptr", "softcapping_value", "ncols", "row_stride", "BLOCK_SIZE")),)  # fmt: skip
OUT = (Layout("0.5.14/0.5.15 layers/triton_ops/softcap.py:31",
              ("output_ptr", "input_ptr", "n_ele", "softcap_const", "BLOCK_SIZE"), defaults=(("BLOCK_SIZE", 128),)),)


def _scalar(value: Any) -> float:
    return float(value.item()) if isinstance(value, torch.Tensor) else float(value)


@register("triton.softcap_inplace_logits_kernel")
def softcap_inplace_logits(grid: Any, *args: Any, **kwargs: Any) -> None:
    a = bind("softcap_inplace_logits_kernel", INPLACE, args, kwargs)
    blocks, rows = grid_of(grid, a)[:2]
    cap, ncols, stride = _scalar(a["softcapping_value"]), as_int(a["ncols"]), as_int(a["row_stride"])
    block = as_int(a["BLOCK_SIZE"])
    cols = min(ncols, blocks * block)
    logits = a["full_logits_ptr"]
    memory = flat(logits, (rows - 1) * stride + cols) if rows > 0 and cols > 0 else None
    for row in range(rows):
        assert memory is not None
        values = memory[row * stride:row * stride + cols]
        values.copy_((torch.tanh(values.float() / cap) * cap).to(values.dtype))


@register("triton.softcap_out_kernel")
def softcap_out(grid: Any, *args: Any, **kwargs: Any) -> None:
    a = bind("softcap_out_kernel", OUT, args, kwargs)
    count, cap = as_int(a["n_ele"]), _scalar(a["softcap_const"])
    source = flat(a["input_ptr"], count).float() / cap
    exped = torch.exp(2 * source)
    flat(a["output_ptr"], count).copy_(((exped - 1) / (exped + 1) * cap).to(a["output_ptr"].dtype))
