"""A ``--set`` that a matrix value overrides: said once, naming both, instead of being silently beaten.

``--set`` changes the file's data before its matrix is expanded, so a case whose matrix entry sets the same field
(or a field under it, or one above it) takes the matrix's value: ``--set server.args.disable-cuda-graph=null`` on a
scenario whose ``path.eager`` variant sets ``server.args.disable-cuda-graph: true`` leaves the eager cases with the
flag. That is the order the format promises (the matrix describes the cases); this says so, once per override.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from harness.scenario.matrix import Override
from harness.scenario.overrides import SetOverride

__all__ = ["overridden_sets", "warn_overridden"]

logger = logging.getLogger("harness.scenario")
_SAID: set[str] = set()
_SHOWN = 3


def _overlaps(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _where(loc: tuple[Any, ...]) -> str:
    # ("matrix", "path", "eager", "server.args.disable-cuda-graph") -> matrix.path.eager: server.args.disable-cuda-graph
    head = ".".join(str(part) for part in loc[:-1])
    return f"{head}: {loc[-1]}" if head else str(loc[-1])


def overridden_sets(file: str, sets: Sequence[SetOverride],
                    expanded: Sequence[tuple[str, dict[str, str], tuple[Override, ...]]]) -> list[str]:
    """One line per ``--set`` some case's matrix entry overrides: the override, the matrix entries (with their
    values) and the cases they beat it in."""
    lines = []
    for s in sets:
        beaten: dict[str, list[str]] = {}
        for name, _, overrides in expanded:
            for ov in overrides:
                if _overlaps(ov.path, s.path):
                    beaten.setdefault(f"{_where(ov.loc)}={ov.value!r}", []).append(name)
        if not beaten:
            continue
        cases = sorted({n for names in beaten.values() for n in names})
        listed = "; ".join(cases[:_SHOWN]) + (f"; ... ({len(cases)} cases)" if len(cases) > _SHOWN else "")
        lines.append(f"{file}: {s.label} is overridden by the matrix ({', '.join(beaten)}) in {listed}: those "
                     "cases keep the matrix's value")
    return lines


def warn_overridden(file: str, sets: Sequence[SetOverride],
                    expanded: Sequence[tuple[str, dict[str, str], tuple[Override, ...]]]) -> list[str]:
    """:func:`overridden_sets`, each logged as a warning once per process (a file is loaded more than once)."""
    lines = overridden_sets(file, sets, expanded)
    for line in lines:
        if line not in _SAID:
            _SAID.add(line)
            logger.warning("%s", line)
    return lines
