"""Plain-torch ports of the GPU kernels real SGLang launches on its CPU path (the real-SGLang CPU build).

Standalone: it imports only torch, so the server's interpreter loads it from the stand-ins' ``PYTHONPATH``
root without the harness. :data:`REGISTRY` maps a kernel's name to its port:

- ``triton.<function name>``: a ``@triton.jit`` kernel; the triton stand-in calls ``port(grid, *args,
  **kwargs)`` on ``kernel[grid](*args, **kwargs)`` (the grid as given: a tuple, or a callable of META);
- ``sgl_kernel.<name>``: an ``sgl_kernel`` op; the ``sgl_kernel`` stand-in exposes it both as
  ``sgl_kernel.<name>`` and as ``torch.ops.sgl_kernel.<name>`` (with ``.default``), called with the op's
  own arguments.

Each module ``triton_*.py`` / ``sgl_kernel_*.py`` registers its ports with :func:`register` on import; a port
follows the semantics of the reference it is ported from (named in its docstring, with file:line in the
release) and is tested against them on random inputs. These are CPU kernels for correctness, not speed:
nothing measured with them is GPU performance.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["REGISTRY", "register"]

F = TypeVar("F", bound=Callable[..., Any])

REGISTRY: dict[str, Callable[..., Any]] = {}


def register(name: str) -> Callable[[F], F]:
    """Register the decorated function as the port of kernel ``name`` (``triton.X`` or ``sgl_kernel.X``)."""
    if not name.startswith(("triton.", "sgl_kernel.")):
        raise ValueError(f"port name {name!r}: expected triton.<kernel> or sgl_kernel.<op>")

    def decorate(fn: F) -> F:
        if name in REGISTRY and REGISTRY[name] is not fn:
            raise ValueError(f"port {name!r} registered twice ({REGISTRY[name].__module__} and {fn.__module__})")
        REGISTRY[name] = fn
        return fn

    return decorate


def _load_ports() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith(("triton_", "sgl_kernel_")):
            importlib.import_module(f"{__name__}.{info.name}")


_load_ports()
