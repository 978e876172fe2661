"""``triton.runtime.autotuner`` stand-in: ``autotune``/``heuristics`` wrap a kernel and launch the same port."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from triton.runtime.errors import OutOfResources, PTXASError
from triton.runtime.jit import JITFunction, KernelInterface

__all__ = ["Autotuner", "Config", "Heuristics", "OutOfResources", "PTXASError", "autotune", "heuristics"]


class Config:
    def __init__(self, kwargs: dict[str, Any] | None = None, num_warps: int = 4, num_stages: int = 3,
                 num_ctas: int = 1, maxnreg: int | None = None, pre_hook: Any = None, **extra: Any) -> None:
        self.kwargs = dict(kwargs or {})
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.num_ctas = num_ctas
        self.maxnreg = maxnreg
        self.pre_hook = pre_hook
        self.extra = extra

    def all_kwargs(self) -> dict[str, Any]:
        return {**self.kwargs, "num_warps": self.num_warps, "num_stages": self.num_stages}


def _wrapped(fn: Any) -> Any:
    return fn if isinstance(fn, KernelInterface) else JITFunction(fn)


class Autotuner(KernelInterface):
    def __init__(self, fn: Any, configs: Any = None, key: Any = None, **options: Any) -> None:
        self.fn = _wrapped(fn)
        self.configs = list(configs or [])
        self.key = key
        self.options = options
        self.__name__ = self.kernel_name


class Heuristics(KernelInterface):
    def __init__(self, fn: Any, values: dict[str, Callable[..., Any]] | None = None) -> None:
        self.fn = _wrapped(fn)
        self.values = dict(values or {})
        self.__name__ = self.kernel_name


def autotune(configs: Any = None, key: Any = None, **options: Any) -> Callable[[Any], Autotuner]:
    return lambda fn: Autotuner(fn, configs, key, **options)


def heuristics(values: dict[str, Callable[..., Any]] | None = None) -> Callable[[Any], Heuristics]:
    return lambda fn: Heuristics(fn, values)
