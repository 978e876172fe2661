"""Stand-in for ``sgl_kernel`` in the real-SGLang CPU build.

SGLang imports ``sgl_kernel`` unguarded on its CPU path (0.5.21 ``kernels/ops/kvcache/cache_move.py:10``,
``srt/mem_cache/allocation.py:47``, ``srt/speculative/spec_utils.py:87``...) and reads its CPU ops as
``torch.ops.sgl_kernel.<op>`` (``srt/layers/attention/intel_amx_backend.py:57``). Here any name and
submodule imports and nested attributes resolve (``scalar_types.uint4b8``,
``srt/layers/quantization/utils.py:521``); calling one runs the plain-torch port registered as
``sgl_kernel.<name>`` in :mod:`sglang_cpu_ports`, or raises :class:`NotImplementedError` naming it. Each
port is also set on ``torch.ops.sgl_kernel`` (with ``.default``); ops without a port are absent there, so
SGLang's ``hasattr(torch.ops.sgl_kernel, ...)`` feature checks answer no.
"""

from __future__ import annotations

from typing import Any

import sglang_cpu_ports
import torch
from _sglang_repro_placeholders import _PlaceholderMeta, install_finder, module_getattr

__all__: list[str] = []

__version__ = "0.0.0+sglang.cpu.standin"
STANDIN = True


class _KernelMeta(_PlaceholderMeta):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = kernel(f"{cls._standin_name}.{name}")
        type.__setattr__(cls, name, value)
        return value

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        qualname = cls._standin_name
        # A submodule's name (sgl_kernel.speculative.X) is looked up as itself, then as sgl_kernel.X.
        port = sglang_cpu_ports.REGISTRY.get(qualname) or sglang_cpu_ports.REGISTRY.get(f"sgl_kernel.{cls.__name__}")
        if port is None:
            raise NotImplementedError(f"{qualname} has no plain-torch port in sglang_cpu_ports (real-SGLang CPU build)")
        return port(*args, **kwargs)


def kernel(qualname: str) -> type:
    """A name of ``sgl_kernel``: importable, with nested names, calling its port when called."""
    module, _, leaf = qualname.rpartition(".")
    return _KernelMeta(leaf, (), {"_standin_name": qualname, "__module__": module})


class _TorchOp:
    """A port seen as ``torch.ops.sgl_kernel.<op>``; ``.default`` is the same op, as for a real overload packet."""

    def __init__(self, name: str, fn: Any) -> None:
        self._name = name
        self._fn = fn
        self.default = self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"sgl_kernel.{self._name} (plain-torch port, real-SGLang CPU build)"


def _publish_torch_ops() -> None:
    namespace = torch.ops.sgl_kernel
    for name, fn in sglang_cpu_ports.REGISTRY.items():
        prefix, _, op = name.partition(".")
        if prefix == "sgl_kernel" and "." not in op:
            setattr(namespace, op, _TorchOp(op, fn))


_publish_torch_ops()
# A submodule no file provides (``sgl_kernel.speculative``) and the package itself: their names are kernels too.
install_finder(__name__, make=kernel)
__getattr__ = module_getattr(__name__, make=kernel)
