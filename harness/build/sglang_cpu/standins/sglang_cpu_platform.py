"""Tell SGLang the CPU has Intel AMX when the launch asks for it (installed by the stand-ins' ``sitecustomize``).

With ``SGLANG_REPRO_CPU_HAS_AMX=1`` it tells SGLang the machine has Intel AMX, through SGLang's own
``sglang.srt.runtime_context.override_platform(has_amx=True)``, as soon as that module is imported. Speculative
verification needs the ``intel_amx`` attention backend (``torch_native_backend.py`` refuses TARGET_VERIFY), and
SGLang swaps it for ``torch_native`` on a CPU without AMX (0.5.21 ``srt/arg_groups/overrides.py:1240-1249``,
the only reader of ``get_platform().has_amx`` besides gpt-oss's overrides). The layers' own AMX checks
(``cpu_has_amx_support()`` at import) are untouched, so they keep their plain-torch paths; the backend's
kernels are the plain-torch ports in ``sglang_cpu_ports``. Without the variable this does nothing.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from types import ModuleType
from typing import Any

__all__ = ["install"]

_TARGET = "sglang.srt.runtime_context"


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds ``_TARGET`` as the other finders do, and runs :func:`_override` once it has executed."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != _TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            original(module)
            _override(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _override(module: ModuleType) -> None:
    override = getattr(module, "override_platform", None)
    if override is None:  # a release before runtime_context's platform facts: nothing to say it through
        print(f"sglang-repro: {_TARGET} has no override_platform; SGLANG_REPRO_CPU_HAS_AMX ignored", file=sys.stderr)
        return
    override(has_amx=True).install()


def install() -> None:
    """With ``SGLANG_REPRO_CPU_HAS_AMX=1``: the hook first on ``sys.meta_path`` (once); without: nothing."""
    if os.environ.get("SGLANG_REPRO_CPU_HAS_AMX") == "1" and not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())
