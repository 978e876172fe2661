"""Stand-in for ``triton`` in the real-SGLang CPU build: imports, names real types, and runs ported kernels.

Real triton needs a GPU toolchain; SGLang imports it everywhere (``@triton.jit`` at module level) although
its CPU path launches few kernels. Here ``@triton.jit``/``@triton.autotune``/``@triton.heuristics`` leave a
:class:`~triton.runtime.jit.JITFunction` (a real class: torch's flop counter and Inductor call ``isinstance``
on triton's types) whose launch ``kernel[grid](*args, **kwargs)`` runs the plain-torch port registered as
``triton.<function name>`` in :mod:`sglang_cpu_ports`, or raises :class:`NotImplementedError` naming the
kernel. ``triton.runtime.driver.active`` raises as real triton does on a machine without a GPU. Any other
name is a placeholder (see ``_sglang_repro_placeholders``).
"""

from __future__ import annotations

from typing import Any

from _sglang_repro_placeholders import install_finder, module_getattr

from triton import language, runtime
from triton.runtime.autotuner import Autotuner, Config, Heuristics, autotune, heuristics
from triton.runtime.jit import JITFunction, KernelInterface, jit

__all__ = ["Autotuner", "Config", "Heuristics", "JITFunction", "KernelInterface", "autotune", "cdiv", "heuristics", "jit",
           "language", "next_power_of_2", "runtime"]

# Parsed by torch (`torch.utils._triton.get_triton_version`) and SGLang (`version.parse(triton.__version__)`):
# a 3.x so version gates pick the current code path. The suffix says what this is.
__version__ = "3.6.0+sglang.cpu.standin"
STANDIN = True

install_finder(__name__)
__getattr__ = module_getattr(__name__)


def cdiv(x: int, y: int) -> int:
    return (x + y - 1) // y


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def set_allocator(allocator: Any) -> None:
    """SGLang sets a TMA allocator at import on some paths; nothing allocates here."""
