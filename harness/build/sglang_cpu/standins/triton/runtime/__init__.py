"""``triton.runtime`` stand-in: the JIT and autotuner types, and a driver with no active backend."""

from __future__ import annotations

from _sglang_repro_placeholders import install_finder, module_getattr

from triton.runtime import driver as _driver_module
from triton.runtime.autotuner import Autotuner, Config, Heuristics
from triton.runtime.jit import JITFunction, KernelInterface

__all__ = ["Autotuner", "Config", "Heuristics", "JITFunction", "KernelInterface", "driver"]

driver = _driver_module.driver
install_finder(__name__)
__getattr__ = module_getattr(__name__)
