"""Where SGLang's own CPU path has no branch on the speculative path, take the GPU branch's kernels (ported).

No SGLang file is edited. Two module flags are set right after their modules import (a post-import hook, installed
by the stand-ins' ``sitecustomize``), so that functions that read them at call time take the branch whose
kernels have plain-torch ports:

- ``sglang.srt.speculative.triton_ops.cache_locs._is_cuda = True``: ``assign_extend_cache_locs_func`` has
  branches for CUDA/HIP/MUSA (0.5.15: and XPU) and NPU only, and returns ``None`` elsewhere (0.5.14
  ``cache_locs.py:337-375``, 0.5.15 ``:338-376``); EAGLE-style verify then stores ``None`` as
  ``out_cache_loc`` (0.5.15 asserts at ``swa_memory_pool.py:169``). With the flag it launches the triton kernel
  ``assign_extend_cache_locs`` (ported). ``_is_cuda`` is read nowhere else in that module.
- ``sglang.srt.speculative.eagle_utils._is_cuda = True`` and its ``sgl_build_tree_kernel_efficient`` (imported
  only on CUDA/HIP/MUSA, 0.5.14 ``eagle_utils.py:25-28``, 0.5.15 ``:52-55``) bound to sgl_kernel's
  ``build_tree_kernel_efficient`` (the stand-in, ported): otherwise ``build_tree_kernel_efficient`` fails with a
  NameError on CPU and ``verify_tree_greedy_func`` does nothing at all (0.5.14 ``:221-260``, 0.5.15
  ``:353-410``), leaving accept_index/predict as allocated. ``_is_cuda`` is read only at those two places there.

This is the one behaviour of this build that is not SGLang's as shipped: a CPU machine running these releases
unmodified cannot serve speculative decoding at all. It applies only where the module has no CPU branch of its
own (no ``_is_cpu``: 0.5.16 added CPU branches, ``eagle_utils.py:51-55, 244, 392`` and
``kernels/ops/speculative/cache_locs.py:407``, and is left alone) and is logged on stderr each time it applies.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

__all__ = ["PATCHED_MODULES", "install"]


def _cache_locs(module: ModuleType) -> None:
    module._is_cuda = True  # type: ignore[attr-defined]


def _eagle_utils(module: ModuleType) -> None:
    import sgl_kernel

    module._is_cuda = True  # type: ignore[attr-defined]
    if not hasattr(module, "sgl_build_tree_kernel_efficient"):
        module.sgl_build_tree_kernel_efficient = sgl_kernel.build_tree_kernel_efficient  # type: ignore[attr-defined]


PATCHED_MODULES: dict[str, Callable[[ModuleType], None]] = {
    "sglang.srt.speculative.triton_ops.cache_locs": _cache_locs,
    "sglang.srt.speculative.eagle_utils": _eagle_utils,
}


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, inner: Any, patch: Callable[[ModuleType], None]) -> None:
        self.inner, self.patch = inner, patch

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        # A release whose module has a CPU branch of its own (``_is_cpu``: 0.5.16 on, e.g. 0.5.21's eagle_utils
        # :48, :60-64, :410) is left as it is: there the switch would send verify to the CUDA JIT.
        if hasattr(module, "_is_cpu"):
            return
        self.patch(module)
        sys.stderr.write(f"[sglang-cpu-build] CPU gap: {module.__name__} takes its GPU branch's ported kernels "
                         "(sglang_cpu_gaps)\n")


class _PostImportFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None) -> Any:
        patch = PATCHED_MODULES.get(fullname)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _PatchingLoader(spec.loader, patch)
                return spec
        return None


def install() -> None:
    """Put the post-import hook first on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _PostImportFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PostImportFinder())
