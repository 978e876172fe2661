"""Machinery shared by the import stand-ins (``triton``, ``torchvision``, ``sgl_kernel``) of the real-SGLang CPU build.

Real SGLang imports GPU-only packages on its CPU path although serving a model there runs none of their
kernels. A stand-in package registers a finder that makes up any of its submodules on demand; any name of
such a module is a placeholder class: importable, usable as an annotation, a default value or a base class,
with nested attributes (``scalar_types.uint4b8``), and raising, naming itself, when called. Nothing here
computes: the kernels that must run are plain-torch ports in :mod:`sglang_cpu_ports`.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

__all__ = ["NotPorted", "install_finder", "module_getattr", "placeholder"]


class NotPorted(NotImplementedError):
    """A GPU kernel or GPU-only object that the CPU build has no plain-torch port of."""


class _PlaceholderMeta(type):
    _standin_name: str  # the full dotted name the placeholder stands for

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = placeholder(f"{cls._standin_name}.{name}")
        type.__setattr__(cls, name, value)  # the same object on every access, so `is` and dict keys hold
        return value

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        raise NotPorted(f"{cls._standin_name}: not available in the real-SGLang CPU build (a GPU-only name; "
                        "no plain-torch port in sglang_cpu_ports)")


def placeholder(qualname: str) -> type:
    """A stand-in for any object named ``qualname``: importable, never runnable."""
    module, _, leaf = qualname.rpartition(".")
    return _PlaceholderMeta(leaf, (), {"_standin_name": qualname, "__module__": module})


def module_getattr(module_name: str) -> Any:
    """A module-level ``__getattr__`` that answers every public name with a placeholder."""
    made: dict[str, Any] = {}

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name not in made:
            made[name] = placeholder(f"{module_name}.{name}")
        return made[name]

    return __getattr__


class _StandinModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = placeholder(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves ``<package>.*`` modules that no real file provides (it sits last on sys.meta_path)."""

    def __init__(self, package: str) -> None:
        self.package = package

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname.startswith(self.package + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        module = _StandinModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def install_finder(package: str) -> None:
    """Make up any submodule of ``package`` on import (once per process)."""
    if not any(isinstance(f, _Finder) and f.package == package for f in sys.meta_path):
        sys.meta_path.append(_Finder(package))
