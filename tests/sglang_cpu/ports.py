"""The plain-torch ports (``sglang_cpu_ports``) loaded into the test process without the other stand-ins.

Putting the stand-ins' root on ``sys.path`` would also make its ``triton``/``sgl_kernel``/``torchvision``
importable here, which torch probes; the ports package is loaded from its directory alone instead.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from harness.build.sglang_cpu import STANDINS_DIR

__all__ = ["launch", "ports"]


def ports() -> ModuleType:
    """The ``sglang_cpu_ports`` package (its ``REGISTRY`` filled)."""
    name = "sglang_cpu_ports"
    if name not in sys.modules:
        path = STANDINS_DIR / name / "__init__.py"
        spec = importlib.util.spec_from_file_location(name, path, submodule_search_locations=[str(path.parent)])
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name]


def launch(kernel: str) -> Callable[..., Any]:
    """``kernel[grid](*args, **kwargs)`` as the triton stand-in runs it: ``launch(kernel)(grid, *args, **kwargs)``."""
    registry: dict[str, Callable[..., Any]] = ports().REGISTRY
    return registry[f"triton.{kernel}"]
