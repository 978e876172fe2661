"""A package's face whose names are imported on first use (PEP 562), written as ordinary imports.

A face that imported its modules at once would make every ``from harness.store.url import ...`` import the whole
store (SQLAlchemy's engine, pandas) and every ``harness.server.hardware`` the server process code: a package's
``__init__`` runs before any of its modules. So a face writes its names as imports under ``if TYPE_CHECKING:``
(what type checkers and readers see), lists them in ``__all__`` (ruff holds the two equal: F401, F822), and ends
with ``__getattr__ = lazy_face(__name__)``. The first name asked of the package reads those imports from the
face's own source and imports only that name's module; the name is then kept on the package. This is the
scientific-Python ``lazy_loader`` pattern (SPEC 1), whose ``attach_stub`` reads a ``.pyi`` the same way.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.util.bounded_read import read_text

__all__ = ["face_imports", "lazy_face"]


def face_imports(source: str, package: str) -> dict[str, str]:
    """Name -> the module it is imported from, for each ``from X import name`` (relative ones resolved against
    ``package``) under a top-level ``if TYPE_CHECKING:`` of a face's ``source``."""
    out: dict[str, str] = {}
    blocks = [node.body for node in ast.parse(source).body
              if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"]
    for block in blocks:
        for stmt in block:
            if isinstance(stmt, ast.ImportFrom):
                base = package.rsplit(".", stmt.level - 1)[0] if stmt.level else ""
                module = ".".join(p for p in (base, stmt.module or "") if p)
                out.update({alias.asname or alias.name: module for alias in stmt.names})
    return out


def lazy_face(package: str) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``'s face: a name of its ``TYPE_CHECKING`` imports is imported from
    its module when first asked for; any other name is an AttributeError, as for a plain module (which also lets
    ``from package import submodule`` import the submodule)."""
    homes: dict[str, str] = {}

    def __getattr__(name: str) -> Any:
        if not homes:  # read once, on the first name asked: importing the package alone reads nothing
            homes.update(face_imports(read_text(Path(sys.modules[package].__file__ or ""), "source"), package))
        module = homes.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
