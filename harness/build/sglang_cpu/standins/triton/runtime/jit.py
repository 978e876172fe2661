"""``triton.runtime.jit`` stand-in: ``@triton.jit`` returns a :class:`JITFunction` whose launch runs a port.

``kernel[grid](*args, **kwargs)`` looks up ``triton.<fn.__name__>`` in ``sglang_cpu_ports.REGISTRY`` and calls
it as ``port(grid, *args, **kwargs)`` (the grid as given: a tuple, or a callable of the launch's META dict).
A kernel without a port raises :class:`NotImplementedError` naming it, so a CPU run that reaches a GPU kernel
stops at that kernel instead of computing something made up.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["JITFunction", "KernelInterface", "constexpr_function", "jit", "launch"]


def launch(name: str, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run the port of triton kernel ``name``; raise naming the kernel when there is none."""
    import sglang_cpu_ports

    port = sglang_cpu_ports.REGISTRY.get(f"triton.{name}")
    if port is None:
        raise NotImplementedError(f"triton kernel {name!r} has no plain-torch port in sglang_cpu_ports "
                                  "(real-SGLang CPU build)")
    return port(grid, *args, **kwargs)


class KernelInterface:
    """What triton launches: ``kernel[grid](...)``."""

    fn: Callable[..., Any]

    @property
    def kernel_name(self) -> str:
        inner: Any = self.fn
        while isinstance(inner, KernelInterface):
            inner = inner.fn
        return str(getattr(inner, "__name__", "kernel"))

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            return launch(self.kernel_name, grid, args, kwargs)

        return run

    def run(self, *args: Any, grid: Any = None, warmup: bool = False, **kwargs: Any) -> Any:
        return launch(self.kernel_name, grid, args, kwargs)

    def warmup(self, *args: Any, **kwargs: Any) -> None:
        return None


class JITFunction(KernelInterface):
    def __init__(self, fn: Callable[..., Any], **options: Any) -> None:
        self.fn = fn
        self.options = options
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__module__ = getattr(fn, "__module__", __name__)
        self.__globals__ = getattr(fn, "__globals__", {})
        self.arg_names = list(getattr(getattr(fn, "__code__", None), "co_varnames", ()))[
            : getattr(getattr(fn, "__code__", None), "co_argcount", 0)]
        self.src = ""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # A @triton.jit helper is called only from inside another kernel's body, which never runs here.
        raise NotImplementedError(f"triton device function {self.__name__!r} called outside a kernel "
                                  "(real-SGLang CPU build)")

    def __repr__(self) -> str:
        return f"JITFunction({self.__module__}:{self.__qualname__})"


def jit(fn: Any = None, **options: Any) -> Any:
    """``@triton.jit`` and ``@triton.jit(...)``."""
    if fn is not None and callable(fn):
        return JITFunction(fn, **options)
    return lambda inner: JITFunction(inner, **options)


def constexpr_function(fn: Any) -> Any:
    return fn
