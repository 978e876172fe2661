"""Matrix expansion: the cartesian product of axes, each case a full scenario of its own.

An axis is either a field with a list of values::

    tokens:
      field: workload.prompt.tokens
      values: [271, 276, 2048]

or named variants, each a set of dotted-path overrides::

    path:
      eager: {server.args.speculative-num-steps: 1, server.args.disable-cuda-graph: true}
      graph: {server.args.speculative-num-steps: 5, expect.before.outcome: pass}

A case is named ``axis=label`` joined by ``,`` (``tokens=276,path=eager``); without a matrix
the single case is ``default``. Setting ``server.args.X`` or ``server.env.X`` to null removes it.
"""

from __future__ import annotations

import copy
import itertools
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Axis",
    "DEFAULT_CASE",
    "MatrixError",
    "Override",
    "apply_overrides",
    "case_name",
    "parse_matrix",
    "product",
    "reference_overrides",
]

DEFAULT_CASE = "default"
_AXIS = re.compile(r"^[a-z][a-z0-9_]*$")
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
_REMOVABLE = {("server", "args"), ("server", "env")}


class MatrixError(Exception):
    def __init__(self, loc: tuple[Any, ...], message: str) -> None:
        super().__init__(message)
        self.loc, self.message = loc, message


@dataclass(frozen=True)
class Override:
    path: tuple[str, ...]
    value: Any
    loc: tuple[Any, ...]  # where the file says it, for error positions


@dataclass(frozen=True)
class Axis:
    name: str
    variants: tuple[tuple[str, tuple[Override, ...]], ...]  # (label, overrides)


def _split(path: Any, loc: tuple[Any, ...]) -> tuple[str, ...]:
    if not isinstance(path, str) or not path or any(not p for p in path.split(".")):
        raise MatrixError(loc, f"expected a dotted field path such as 'workload.prompt.tokens', got {path!r}")
    return tuple(path.split("."))


def _label(value: Any) -> str:
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", text) or "_"


def parse_matrix(matrix: Any) -> list[Axis]:
    loc0: tuple[Any, ...] = ("matrix",)
    if not isinstance(matrix, dict) or not matrix:
        raise MatrixError(loc0, "matrix must be a non-empty mapping of axis name -> variants")
    axes = []
    for name, body in matrix.items():
        loc = loc0 + (name,)
        if not isinstance(name, str) or not _AXIS.match(name):
            raise MatrixError(loc, f"axis name {name!r} must be lowercase letters, digits and '_'")
        if isinstance(body, dict) and "field" in body:
            extra = set(body) - {"field", "values"}
            if extra:
                raise MatrixError(loc + (sorted(extra)[0],), f"unknown key {sorted(extra)[0]!r} in a field axis "
                                  "(valid: field, values)")
            path = _split(body["field"], loc + ("field",))
            values = body.get("values")
            if not isinstance(values, list) or not values:
                raise MatrixError(loc + ("values",), "a field axis needs a non-empty list of values")
            variants = tuple(
                (_label(v), (Override(path, v, loc + ("values", i)),)) for i, v in enumerate(values)
            )
        elif isinstance(body, dict):
            if not body:
                raise MatrixError(loc, "axis has no variants")
            variants_list = []
            for label, overrides in body.items():
                vloc = loc + (label,)
                if not isinstance(label, str) or not _LABEL.match(label):
                    raise MatrixError(vloc, f"variant label {label!r} must be letters, digits, '_', '.', '+', '-'")
                if not isinstance(overrides, dict) or not overrides:
                    raise MatrixError(vloc, "a variant is a non-empty mapping of dotted field path -> value")
                variants_list.append(
                    (label, tuple(Override(_split(p, vloc + (p,)), v, vloc + (p,)) for p, v in overrides.items()))
                )
            variants = tuple(variants_list)
        elif isinstance(body, list):
            raise MatrixError(loc, "a list needs a field: write {field: some.path, values: [...]}")
        else:
            raise MatrixError(loc, f"expected {{field, values}} or named variants, got {body!r}")
        labels = [label for label, _ in variants]
        dupes = {label for label in labels if labels.count(label) > 1}
        if dupes:
            raise MatrixError(loc, f"duplicate variant label(s): {', '.join(sorted(dupes))}")
        axes.append(Axis(name, variants))
    return axes


def reference_overrides(body: Any) -> tuple[Override, ...]:
    """The `reference:` mapping of dotted paths -> values (only the workload and timeouts may change:
    the reference server must run the same server flags as the real build)."""
    loc = ("reference",)
    if not isinstance(body, dict) or not body:
        raise MatrixError(loc, "reference is a non-empty mapping of dotted path -> value, e.g. workload.requests: 8")
    out = []
    for p, v in body.items():
        path = _split(p, loc + (p,))
        if path[0] not in ("workload", "timeouts"):
            raise MatrixError(loc + (p,), f"reference may only change workload.* or timeouts.*, not {p!r}")
        out.append(Override(path, v, loc + (p,)))
    return tuple(out)


def apply_overrides(data: dict[str, Any], overrides: tuple[Override, ...]) -> dict[str, Any]:
    """A deep copy of ``data`` with the overrides set (never mutates the caller's data)."""
    out = copy.deepcopy(data)
    for ov in overrides:
        node = out
        for i, part in enumerate(ov.path[:-1]):
            nxt = node.get(part) if isinstance(node, dict) else None
            if nxt is None:
                nxt = node[part] = {}
            if not isinstance(nxt, dict):
                raise MatrixError(ov.loc, f"{'.'.join(ov.path[: i + 1])} is not a mapping, cannot set "
                                  f"{'.'.join(ov.path)}")
            node = nxt
        if ov.value is None and ov.path[:-1] in _REMOVABLE:
            node.pop(ov.path[-1], None)
        else:
            node[ov.path[-1]] = copy.deepcopy(ov.value)
    return out


def case_name(choice: tuple[tuple[str, str], ...]) -> str:
    return ",".join(f"{axis}={label}" for axis, label in choice) or DEFAULT_CASE


def product(axes: list[Axis]) -> list[tuple[str, dict[str, str], tuple[Override, ...]]]:
    """Every case: (name, {axis: label}, overrides)."""
    cases = []
    for combo in itertools.product(*[[(a.name, label, ovs) for label, ovs in a.variants] for a in axes]):
        choice = tuple((axis, label) for axis, label, _ in combo)
        overrides = tuple(ov for _, _, ovs in combo for ov in ovs)
        cases.append((case_name(choice), dict(choice), overrides))
    return cases
