"""Placeholders for GPU-only packages: the one copy both kinds of sglang build use.

Real SGLang imports GPU-only packages (``triton``, ``torchvision``, ``sgl_kernel``) on paths that run none of
their code: parsing flags in a flags-only build (``deps=none``), serving a model on the CPU in the real-SGLang CPU
build (``deps=cpu``). A stand-in package registers a finder that makes up any of its submodules on demand; any
name of such a module is a placeholder class: importable, usable as an annotation, a default value or a base
class, with nested attributes (``scalar_types.uint4b8``), and raising, naming itself, when called. Nothing here
computes: the kernels the CPU build must run are plain-torch ports in :mod:`sglang_cpu_ports`.

Found by its top-level name: first on the CPU server's ``PYTHONPATH`` (``standins/``), and copied beside the stubs
of ``harness/data/stubs`` into a flags-only build's site-packages (``harness.build.environments``).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Callable
from typing import Any

__all__ = ["NotPorted", "install_finder", "module_getattr", "placeholder"]


class NotPorted(NotImplementedError):
    """A GPU kernel or GPU-only object called where no plain-torch port of it exists."""


class _PlaceholderMeta(type):
    _standin_name: str  # the full dotted name the placeholder stands for

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = placeholder(f"{cls._standin_name}.{name}")
        type.__setattr__(cls, name, value)  # the same object on every access, so `is` and dict keys hold
        return value

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        # Neutral about the build: a flags-only build never calls one, the CPU build calls one only where a kernel
        # has no plain-torch port.
        raise NotPorted(f"{cls._standin_name}: a GPU-only name that sglang-repro stands in for cannot run here "
                        "(this build has no plain-torch port of it)")


def placeholder(qualname: str) -> type:
    """A stand-in for any object named ``qualname``: importable, never runnable."""
    module, _, leaf = qualname.rpartition(".")
    return _PlaceholderMeta(leaf, (), {"_standin_name": qualname, "__module__": module})


def module_getattr(module_name: str, make: Callable[[str], Any] = placeholder) -> Any:
    """A module-level ``__getattr__`` that answers every public name with ``make(its full name)``, once."""
    made: dict[str, Any] = {}

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name not in made:
            made[name] = make(f"{module_name}.{name}")
        return made[name]

    return __getattr__


class _StandinModule(types.ModuleType):
    """A submodule no file provides: each public name is ``make(its full name)``, made on first access."""

    def __init__(self, name: str, make: Callable[[str], Any]) -> None:
        super().__init__(name)
        self.__path__: list[str] = []
        self._sglang_repro_make = make

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = self._sglang_repro_make(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves ``<package>.*`` modules that no real file provides (it sits last on sys.meta_path)."""

    def __init__(self, package: str, make: Callable[[str], Any]) -> None:
        self.package = package
        self.make = make

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname.startswith(self.package + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        return _StandinModule(spec.name, self.make)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def install_finder(package: str, make: Callable[[str], Any] = placeholder) -> None:
    """Make up any submodule of ``package`` on import (once per process); its names are ``make(full name)``:
    placeholders, or what a stand-in package makes of them (``sgl_kernel``: kernels that run their ports)."""
    if not any(isinstance(f, _Finder) and f.package == package for f in sys.meta_path):
        sys.meta_path.append(_Finder(package, make))
