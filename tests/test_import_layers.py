"""The package's imports run one way (issue 31): no cycle between its packages, every first-party import real.

Every import of every module under ``harness/`` is read with ``ast`` -- the module-level ones and the
deferred ones inside functions alike, since a deferred import is still a dependency, only a later one.
Each is folded to its package (``harness.X`` for X a subpackage or a top-level module), and the graph of
those packages must have no cycle: a cycle is what made 19 modules one knot before. The walker is first
shown a planted cycle, so a walker that finds nothing cannot pass.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "harness"


def module_name(path: Path, root: Path) -> str:
    """``harness.a.b`` for ``root/harness/a/b.py``; a package's ``__init__.py`` is the package itself."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source: str, module: str, *, is_package: bool) -> list[tuple[int, str]]:
    """``(line, dotted name)`` for each import in ``source``, at any depth (functions, ``if TYPE_CHECKING``);
    relative imports resolved against ``module``; ``from a import b`` gives ``a.b`` (a module or a name in ``a``)."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            out += [(node.lineno, f"{base}.{alias.name}" if alias.name != "*" else base) for alias in node.names]
    return out


# Package data, not harness modules: the import stand-ins a real SGLang CPU server's own interpreter finds on its
# PYTHONPATH (``triton``, ``sgl_kernel``, ...). They import each other by their top-level names.
STANDINS = Path("harness", "build", "sglang_cpu", "standins")
# Likewise the import-only stubs a flags-only build's interpreter finds (``triton``, ``torchvision``: harness.data),
# with the stand-ins' ``_sglang_repro_placeholders`` copied beside them.
STUBS = Path("harness", "data", "stubs")


def package_of(dotted: str) -> str:
    """``harness.X`` for any name under ``harness.X``; ``harness`` itself for the package's own names."""
    parts = dotted.split(".")
    return ".".join(parts[:2])


def first_party_imports(root: Path) -> dict[str, list[tuple[int, str]]]:
    """Module name -> its imports of ``harness`` names, for every module under ``root/harness``."""
    out: dict[str, list[tuple[int, str]]] = {}
    for path in sorted((root / "harness").rglob("*.py")):
        if root / STANDINS in path.parents or root / STUBS in path.parents:
            continue
        name = module_name(path, root)
        found = imports_of(path.read_text(encoding="utf-8"), name, is_package=path.name == "__init__.py")
        out[name] = [(line, dotted) for line, dotted in found if dotted == "harness" or dotted.startswith("harness.")]
    return out


def package_graph(imports: Mapping[str, Iterable[tuple[int, str]]], packages: set[str]) -> dict[str, dict[str, str]]:
    """Package -> {package it imports: one ``module:line`` that does}, self-edges and ``harness`` itself left out
    (``from harness import __version__`` names the root, which imports nothing of its own)."""
    graph: dict[str, dict[str, str]] = {p: {} for p in packages}
    for module, found in imports.items():
        source = package_of(module)
        for line, dotted in found:
            target = package_of(dotted)
            if target != source and target in packages and source in packages:
                graph[source].setdefault(target, f"{module}:{line}")
    return graph


def find_cycle(graph: Mapping[str, Mapping[str, str]]) -> list[str]:
    """One cycle as ``a -> b (module:line) -> ... -> a``, or ``[]`` when the graph has none (depth-first search)."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, {})):
            if state.get(nxt) == 1:
                ring = path[path.index(nxt):] + [nxt]
                return [f"{a} -> {b} ({graph[a][b]})" for a, b in zip(ring, ring[1:], strict=False)]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return []

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return []


def _packages(root: Path) -> set[str]:
    top = root / "harness"
    subs = {f"harness.{p.name}" for p in top.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    subs |= {f"harness.{p.name}" for p in top.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    mods = {f"harness.{p.stem}" for p in top.glob("*.py") if p.stem not in ("__init__", "__main__")}
    return subs | mods


def _plant(root: Path, files: Mapping[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_walker_finds_a_planted_cycle_through_a_deferred_import(tmp_path: Path) -> None:
    _plant(tmp_path, {
        "harness/__init__.py": "",
        "harness/a/__init__.py": "",
        "harness/a/one.py": "from harness.b.two import f\n",
        "harness/b/__init__.py": "",
        "harness/b/two.py": "def f():\n    from harness.a import one\n    return one\n",
        "harness/c.py": "from . import a\n",
    })
    imports = first_party_imports(tmp_path)
    assert imports["harness.b.two"] == [(2, "harness.a.one")]
    assert imports["harness.c"] == [(1, "harness.a")]
    graph = package_graph(imports, _packages(tmp_path))
    assert find_cycle(graph) == ["harness.a -> harness.b (harness.a.one:1)", "harness.b -> harness.a (harness.b.two:2)"]
    (tmp_path / "harness/b/two.py").write_text("def f():\n    return 1\n", encoding="utf-8")
    assert find_cycle(package_graph(first_party_imports(tmp_path), _packages(tmp_path))) == []


def test_no_package_level_cycle_in_harness() -> None:
    graph = package_graph(first_party_imports(ROOT), _packages(ROOT))
    assert len(graph) > 15 and sum(len(v) for v in graph.values()) > 30, "the walker found too little"
    cycle = find_cycle(graph)
    assert not cycle, "an import runs backwards, turn it around:\n" + "\n".join(cycle)


def _exists(dotted: str) -> bool:
    """``dotted`` names a module or package file, or a name inside one (``from harness.x import f``)."""
    for candidate in (dotted, dotted.rpartition(".")[0]):
        path = ROOT / Path(*candidate.split("."))
        if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file() or (candidate and path.is_dir()
                                                                                     and any(path.glob("*.py"))):
            return True
    return False


def test_every_first_party_import_names_a_module_that_exists() -> None:
    assert not _exists("harness.no_such_package.thing")
    missing = [f"{module}:{line} {dotted}" for module, found in first_party_imports(ROOT).items()
               for line, dotted in found if not _exists(dotted)]
    assert not missing, "these imports name no module:\n" + "\n".join(missing)


def test_every_module_imports() -> None:
    """``python -c 'import harness.<every module>'`` in a fresh interpreter, each failure named: a module
    whose import raises (a missing name after a move, a cycle that bites at import time) fails here.
    ``__main__`` modules run on import, so they are left out."""
    names = [name for name in first_party_imports(ROOT) if not name.endswith("__main__")]
    assert len(names) > 100
    script = ("import importlib, sys, traceback\n"
              "bad = []\n"
              "for name in sys.argv[1:]:\n"
              "    try:\n"
              "        importlib.import_module(name)\n"
              "    except BaseException as exc:\n"
              "        bad.append(f'{name}: {type(exc).__name__}: {exc}')\n"
              "print('\\n'.join(bad))\n"
              "sys.exit(1 if bad else 0)\n")
    done = subprocess.run([sys.executable, "-c", script, *names], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, check=False)
    assert done.returncode == 0, "these modules fail to import:\n" + done.stdout + done.stderr[-2000:]


def reachable(graph: Mapping[str, Mapping[str, str]], start: str) -> set[str]:
    """Every package ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph.get(todo.pop(), {}):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_expectations_sit_beside_compare_on_the_floor_below() -> None:
    """The design's expectations (issue 44): the pipeline judges each run by them, ``compare`` each role, so they
    live in a package of their own that reaches neither; under ``harness.compare`` the pipeline's import of the judge
    would close the ring pipeline -> compare -> pipeline."""
    graph = package_graph(first_party_imports(ROOT), _packages(ROOT))
    assert "harness.expectations" in graph["harness.compare"], "compare judges roles with harness.expectations"
    assert "harness.expectations" in graph["harness.pipeline"], "the pipeline judges runs with harness.expectations"
    assert "harness.pipeline" in graph["harness.compare"]
    below = reachable(graph, "harness.expectations")
    assert not below & {"harness.compare", "harness.pipeline"}, sorted(below)
    assert not (ROOT / "harness" / "measure" / "expectation.py").exists()


# The one module of the core that may import the CPU reference server (issue 44): the builds, the launcher,
# pre-flight, minimize and the demo history ask it.
REFERENCE_SERVER_DOOR = "harness.build.reference_server"


def test_only_the_door_of_the_core_imports_the_reference_server() -> None:
    found = [f"{module}:{line} {dotted}" for module, imports in first_party_imports(ROOT).items()
             if package_of(module) != "harness.sim" and module != REFERENCE_SERVER_DOOR
             for line, dotted in imports if package_of(dotted) == "harness.sim"]
    assert not found, f"import the reference server only through {REFERENCE_SERVER_DOOR}:\n" + "\n".join(found)


def test_the_reference_server_imports_nothing_of_the_harness() -> None:
    """It spells SGLang in its own code (harness.sim.sglang_words): an import of the contract (or of anything the
    contract's words reach) would make the end-to-end tests on it agree with the contract by construction."""
    found = [f"{module}:{line} {dotted}" for module, imports in first_party_imports(ROOT).items()
             if package_of(module) == "harness.sim"
             for line, dotted in imports if package_of(dotted) not in ("harness.sim", "harness")]
    assert not found, "the reference server imports these of the harness:\n" + "\n".join(found)
