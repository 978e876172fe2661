"""Rules of shape the harness keeps (issue 19): no function longer than 60 lines, and one run record only.

The rules are read off the real source with ``ast``; each is first shown to catch a planted offender, so
a walker that silently finds nothing cannot pass.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

HARNESS = Path(__file__).resolve().parent.parent / "harness"
MAX_FUNCTION_LINES = 60
# The run record is ``harness.records.run_record.RunRecord``; the legacy shape of that name must not come back.
GONE_NAMES = ("RunResult",)


def long_functions(source: str, where: str, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``where:line name (N lines)`` for each function (nested ones too) longer than ``limit`` lines,
    counted from its ``def`` line to its last line."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > limit:
                out.append(f"{where}:{node.lineno} {node.name} ({lines} lines)")
    return out


def gone_names(source: str, where: str) -> list[str]:
    """``where:line name`` for each identifier, attribute, definition or import of a name in ``GONE_NAMES``,
    and each line of text (docstring, comment) that mentions one."""
    out = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.asname or a.name for a in node.names]
        line = getattr(node, "lineno", 0)
        out += [f"{where}:{line} {n}" for n in names if n.split(".")[-1] in GONE_NAMES]
    for number, line in enumerate(source.splitlines(), 1):
        out += [f"{where}:{number} {n} (text)" for n in GONE_NAMES if n in line]
    return sorted(set(out))


def _harness_sources() -> list[tuple[str, str]]:
    files = sorted(HARNESS.rglob("*.py"))
    assert len(files) > 50, f"only {len(files)} files under {HARNESS}"
    return [(str(p.relative_to(HARNESS.parent)), p.read_text(encoding="utf-8")) for p in files]


def test_the_walker_finds_a_planted_long_function_and_a_legacy_name() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))  # def line + 60 = 61 lines
    planted = f"class K:\n    def short(self):\n        return 1\n\n    async def long(self):\n{textwrap.indent(body, '    ')}\n"
    assert long_functions(planted, "p.py") == ["p.py:5 long (61 lines)"]
    assert long_functions(planted.replace("        x0 = 0\n", ""), "p.py") == []
    legacy = "from harness.x import RunResult\n\ndef f(r: 'RunResult') -> None:\n    return r.RunResult\n"
    assert [hit.split()[0] for hit in gone_names(legacy, "l.py")] == ["l.py:1", "l.py:1", "l.py:3", "l.py:4",
                                                                       "l.py:4"]
    assert gone_names("def f(record):\n    return record.run_id\n", "ok.py") == []


def test_no_function_in_harness_is_longer_than_60_lines() -> None:
    found = [hit for where, text in _harness_sources() for hit in long_functions(text, where)]
    assert not found, "split these into phases or helpers:\n" + "\n".join(found)


def test_no_legacy_run_result_in_harness() -> None:
    found = [hit for where, text in _harness_sources() for hit in gone_names(text, where)]
    assert not found, "the run record is harness.records.run_record.RunRecord:\n" + "\n".join(found)


# Who may spell a registered metric's name: the registry itself, the CPU reference server (whose own stats
# model SGLang's, not the harness's metrics) and the scenario model (pydantic field names and a Literal the
# registry test holds equal to the registry's CROSS_PHASE).
_NAME_OWNERS = ("harness/records/metric_definitions.py", "harness/sim/", "harness/scenario/model.py")


def metric_name_literals(source: str, where: str, names: frozenset[str]) -> list[str]:
    """``where:line name`` for each string constant that is exactly one of ``names``."""
    return sorted({f"{where}:{node.lineno} {node.value}" for node in ast.walk(ast.parse(source))
                   if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names})


def _registered() -> frozenset[str]:
    from harness.records.metric_definitions import METRICS, PHASE_ONLY

    return frozenset(METRICS) | frozenset(PHASE_ONLY)


def test_the_walker_finds_a_planted_metric_name() -> None:
    planted = 'def f(m):\n    """accept_length in a docstring is prose."""\n    return m["accept_length"], m["x"]\n'
    assert metric_name_literals(planted, "p.py", _registered()) == ["p.py:3 accept_length"]
    assert metric_name_literals("from harness.records.metric_definitions import ACCEPT_LENGTH\nn = ACCEPT_LENGTH.name\n",
                                "ok.py", _registered()) == []


def test_metric_names_are_spelled_by_the_registry_only() -> None:
    names = _registered()
    found = [hit for where, text in _harness_sources() if not where.startswith(_NAME_OWNERS)
             for hit in metric_name_literals(text, where, names)]
    assert not found, "read these names from harness.records.metric_definitions:\n" + "\n".join(found)
