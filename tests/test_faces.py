"""Every package under ``harness/`` has a face (issue 44): an ``__init__.py`` with ``__all__``.

A face names either its modules (``harness.util``, ``harness.records``: tools every layer reads, each by its own
name) or the names other packages use. A face that imports on first use (:mod:`harness.util.face`) must list the
same names in ``__all__`` as under its ``if TYPE_CHECKING:``, import none of its modules when the package alone is
imported, and give each name as its module defines it.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.util.face import face_imports

REPO = Path(__file__).resolve().parent.parent
HARNESS = REPO / "harness"
# Package data, not harness packages: the import stand-ins a real SGLang server's own interpreter finds.
NOT_PACKAGES = (HARNESS / "build" / "sglang_cpu" / "standins", HARNESS / "data" / "stubs")


def _packages() -> list[Path]:
    return sorted(d for d in HARNESS.rglob("*") if d.is_dir() and any(d.glob("*.py"))
                  and not any(d == n or n in d.parents for n in NOT_PACKAGES))


def _name(folder: Path) -> str:
    return ".".join(folder.relative_to(REPO).parts)


def _all_of(source: str) -> list[str] | None:
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]:
            return list(ast.literal_eval(node.value))
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "__all__" and node.value is not None:
            return list(ast.literal_eval(node.value))
    return None


def _names_modules_only(source: str) -> bool:
    """A face of a docstring and ``__all__`` alone: it names the package's modules."""
    body = ast.parse(source).body
    return all((isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)) or
               (isinstance(n, ast.Assign) and [getattr(t, "id", None) for t in n.targets] == ["__all__"]) for n in body)


def _lazy(source: str) -> bool:
    return "lazy_face(__name__)" in source


def test_the_face_reader_finds_the_names_under_type_checking_only() -> None:
    planted = ("from typing import TYPE_CHECKING\nfrom harness.a.x import eager\n"
               "if TYPE_CHECKING:\n    from harness.a.y import Y, f as g\n    from .z import Z\n    import os\n")
    assert face_imports(planted, "harness.a") == {"Y": "harness.a.y", "g": "harness.a.y", "Z": "harness.a.z"}
    assert face_imports("if TYPE_CHECKING:\n    from ..b import B\n", "harness.a") == {"B": "harness.b"}


def test_every_package_has_a_face_with_all() -> None:
    folders = _packages()
    assert len(folders) > 20
    missing = [_name(d) for d in folders if not (d / "__init__.py").is_file()]
    assert not missing, "these packages have no __init__.py: " + ", ".join(missing)
    no_all = [_name(d) for d in folders if _all_of((d / "__init__.py").read_text(encoding="utf-8")) is None]
    assert not no_all, "these faces have no __all__: " + ", ".join(no_all)


def _faces() -> list[tuple[str, str]]:
    return [(_name(d), (d / "__init__.py").read_text(encoding="utf-8")) for d in _packages()]


@pytest.mark.parametrize(("package", "source"), [f for f in _faces() if _lazy(f[1])], ids=lambda v: v[:40])
def test_a_lazy_face_lists_its_names_once_and_gives_each(package: str, source: str) -> None:
    homes = face_imports(source, package)
    assert sorted(homes) == sorted(_all_of(source) or []), f"{package}: __all__ and the TYPE_CHECKING imports differ"
    folder = REPO / Path(*package.split("."))
    shadowed = [n for n in homes if (folder / f"{n}.py").is_file() or (folder / n).is_dir()]
    assert not shadowed, f"{package}: {shadowed} name a module too (importing it replaces the name on the package)"
    face = importlib.import_module(package)
    for name, module in homes.items():
        assert getattr(face, name) is getattr(importlib.import_module(module), name), f"{package}.{name}"
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        face.no_such_name  # noqa: B018


def test_a_module_face_names_modules_of_its_own() -> None:
    faces = [(p, s) for p, s in _faces() if _names_modules_only(s)]
    assert {"harness.util", "harness.records"} <= {p for p, _ in faces}
    for package, source in faces:
        folder = REPO / Path(*package.split("."))
        strays = [n for n in _all_of(source) or [] if not ((folder / f"{n}.py").is_file() or (folder / n).is_dir())]
        assert not strays, f"{package}: {strays} in __all__ name no module of the package"


def test_a_lazy_face_imports_none_of_its_modules_until_asked() -> None:
    lazy = [p for p, s in _faces() if _lazy(s)]
    assert len(lazy) >= 8
    code = ("import importlib, json, sys\nout = {}\nfor p in sys.argv[1:]:\n    before = set(sys.modules)\n"
            "    importlib.import_module(p)\n    out[p] = sorted(m for m in set(sys.modules) - before if m.startswith(p + '.'))\n"
            "print(json.dumps(out))\n")
    done = subprocess.run([sys.executable, "-c", code, *lazy], capture_output=True, text=True, timeout=120, cwd=REPO,
                          check=True)
    eager = {p: mods for p, mods in json.loads(done.stdout).items() if mods}
    assert not eager, f"importing these faces imported their modules: {eager}"
