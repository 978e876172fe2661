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

The number of cases is bounded (:func:`max_cases`, 256 unless ``$SGLANG_REPRO_MAX_CASES`` says
otherwise) and checked before any case is built: seven axes of ten values are ten million cases.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import re
from dataclasses import dataclass
from typing import Any

from harness.scenario.errors import excerpt

__all__ = [
    "DEFAULT_CASE",
    "DEFAULT_MAX_CASES",
    "MAX_CASES_ENV",
    "Axis",
    "MatrixError",
    "Override",
    "apply_overrides",
    "check_weight",
    "case_name",
    "max_cases",
    "parse_matrix",
    "product",
    "reference_overrides",
    "cpu_overrides",
    "CPU_OVERRIDABLE",
]

DEFAULT_CASE = "default"
DEFAULT_MAX_CASES = 256
MAX_CASES_ENV = "SGLANG_REPRO_MAX_CASES"
_MAX_LABEL = 48
_AXIS = re.compile(r"^[a-z][a-z0-9_]*\Z")
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*\Z")
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


Variant = tuple[str, tuple[Override, ...]]


def _split(path: Any, loc: tuple[Any, ...]) -> tuple[str, ...]:
    if not isinstance(path, str) or not path or any(not p for p in path.split(".")):
        raise MatrixError(loc, f"expected a dotted field path such as 'workload.prompt.tokens', got {excerpt(path)}")
    return tuple(path.split("."))


def _label(value: Any) -> str:
    text = str(value).lower() if isinstance(value, bool) else str(value)
    label = re.sub(r"[^A-Za-z0-9_.+-]+", "_", text) or "_"
    if len(label) > _MAX_LABEL:  # a long value keeps a short, still distinct, case name
        label = label[: _MAX_LABEL - 9] + "~" + hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()[:8]
    return label


def parse_matrix(matrix: Any) -> list[Axis]:
    loc0: tuple[Any, ...] = ("matrix",)
    if not isinstance(matrix, dict) or not matrix:
        raise MatrixError(loc0, "matrix must be a non-empty mapping of axis name -> variants")
    axes = []
    for name, body in matrix.items():
        loc = loc0 + (name,)
        if not isinstance(name, str) or not _AXIS.match(name):
            raise MatrixError(loc, f"axis name {excerpt(name)} must be lowercase letters, digits and '_'")
        if isinstance(body, dict) and "field" in body:
            extra = set(body) - {"field", "values"}
            if extra:
                raise MatrixError(loc + (sorted(extra)[0],), f"unknown key {excerpt(sorted(extra)[0])} in a field axis "
                                  "(valid: field, values)")
            path = _split(body["field"], loc + ("field",))
            values = body.get("values")
            if not isinstance(values, list) or not values:
                raise MatrixError(loc + ("values",), "a field axis needs a non-empty list of values")
            variants: tuple[Variant, ...] = tuple(
                (_label(v), (Override(path, v, loc + ("values", i)),)) for i, v in enumerate(values)
            )
        elif isinstance(body, dict):
            if not body:
                raise MatrixError(loc, "axis has no variants")
            variants_list: list[Variant] = []
            for label, overrides in body.items():
                vloc = loc + (label,)
                if not isinstance(label, str) or not _LABEL.match(label):
                    raise MatrixError(vloc, f"variant label {excerpt(label)} must be letters, digits, "
                                            "'_', '.', '+', '-'")
                if not isinstance(overrides, dict) or not overrides:
                    raise MatrixError(vloc, "a variant is a non-empty mapping of dotted field path -> value")
                variants_list.append(
                    (label, tuple(Override(_split(p, vloc + (p,)), v, vloc + (p,)) for p, v in overrides.items()))
                )
            variants = tuple(variants_list)
        elif isinstance(body, list):
            raise MatrixError(loc, "a list needs a field: write {field: some.path, values: [...]}")
        else:
            raise MatrixError(loc, f"expected {{field, values}} or named variants, got {excerpt(body)}")
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
            raise MatrixError(loc + (p,), f"reference may only change workload.* or timeouts.*, not {excerpt(p)}")
        out.append(Override(path, v, loc + (p,)))
    return tuple(out)


# What the real-SGLang CPU build may change: it runs other hardware, a tiny model and CPU flags, and may judge
# its own expectations (a hypothesis on a GPU can be confirmed on it); never the builds or the matrix.
CPU_OVERRIDABLE = ("server", "hardware", "workload", "timeouts", "checks", "expect")


def cpu_overrides(body: Any) -> tuple[Override, ...]:
    """The `cpu.overrides:` mapping of dotted paths -> values (the fields of :data:`CPU_OVERRIDABLE`)."""
    loc = ("cpu", "overrides")
    if body is None:
        return ()
    if not isinstance(body, dict):
        raise MatrixError(loc, "cpu.overrides is a mapping of dotted path -> value, e.g. server.model: tiny:llama")
    out = []
    for p, v in body.items():
        path = _split(p, loc + (p,))
        if path[0] not in CPU_OVERRIDABLE:
            raise MatrixError(loc + (p,), f"cpu.overrides may only change {', '.join(f'{k}.*' for k in CPU_OVERRIDABLE)}, "
                                          f"not {excerpt(p)}")
        out.append(Override(path, v, loc + (p,)))
    return tuple(out)


def apply_overrides(data: dict[str, Any], overrides: tuple[Override, ...]) -> dict[str, Any]:
    """``data`` with the overrides set; never mutates the caller's data.

    Only the mappings along each override's path are copied; the rest is shared with ``data``
    (nothing downstream mutates it). A deep copy per case would cost cases x file size.
    """
    out = dict(data)
    copied: set[tuple[str, ...]] = {()}
    for ov in overrides:
        node = out
        for i, part in enumerate(ov.path[:-1]):
            here = ov.path[: i + 1]
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = {}
                copied.add(here)
            if not isinstance(nxt, dict):
                raise MatrixError(ov.loc, f"{excerpt('.'.join(here), quote=False)} is not a mapping, cannot set "
                                  f"{excerpt('.'.join(ov.path), quote=False)}")
            if here not in copied:
                nxt = node[part] = dict(nxt)
                copied.add(here)
            node = nxt
        # null removes: under server.args/env for a matrix variant (a flag a case drops), anywhere for --set (the
        # docs' promise; setting None left the field null, not its default)
        if ov.value is None and (ov.path[:-1] in _REMOVABLE or tuple(ov.loc[:1]) == ("--set",)):
            node.pop(ov.path[-1], None)
        else:
            node[ov.path[-1]] = ov.value
        # What now sits at ov.path is the file's own value: copy it again before setting inside it. (``copied``
        # holds every prefix of what it holds, so nothing under ov.path is in it unless ov.path itself is.)
        if ov.path in copied:
            copied = {c for c in copied if c[: len(ov.path)] != ov.path}
    return out


def case_name(choice: tuple[tuple[str, str], ...]) -> str:
    return ",".join(f"{axis}={label}" for axis, label in choice) or DEFAULT_CASE


def max_cases() -> int:
    """The most cases one scenario may expand to: ``$SGLANG_REPRO_MAX_CASES``, else 256."""
    raw = os.environ.get(MAX_CASES_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_CASES
    try:
        limit = int(raw)
    except ValueError:
        limit = 0
    if limit < 1:
        raise MatrixError(("matrix",), f"{MAX_CASES_ENV}={excerpt(raw)} is not a positive integer")
    return limit


def check_size(axes: list[Axis]) -> int:
    """The number of cases ``axes`` give; MatrixError past :func:`max_cases`, before any is built."""
    count = math.prod(len(a.variants) for a in axes)
    limit = max_cases()
    if count > limit:
        sizes = " x ".join(f"{a.name}={len(a.variants)}" for a in axes[:8]) + (" x ..." if len(axes) > 8 else "")
        raise MatrixError(("matrix",), f"matrix expands to {count} cases ({sizes}), more than the limit of {limit}; "
                                       f"split the scenario, or raise the limit with {MAX_CASES_ENV}={count}")
    return count


# Cases x the file's values (and characters), bounded before any case is validated: 256 cases of a file of
# 20k values built 5 million pydantic values (5.8 GB, 43 s) in `validate`. The seed scenarios weigh ~100 x 16.
MAX_EXPANDED_VALUES = 500_000
MAX_EXPANDED_CHARS = 64 << 20


def _weight(data: Any) -> tuple[int, int]:
    """(values, characters of text) in ``data``, walked without recursion. A mapping's keys are values too (they
    are hashable, so never a mapping or a list themselves): counted where their mapping is."""
    values = chars = 0
    stack = [data]
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        item = pop()
        values += 1
        if isinstance(item, str):
            chars += len(item)
        elif isinstance(item, dict):
            values += len(item)
            for key, value in item.items():
                if isinstance(key, str):
                    chars += len(key)
                push(value)
        elif isinstance(item, list):
            extend(item)
    return values, chars


def check_weight(data: Any, cases: int) -> None:
    """MatrixError when validating ``cases`` copies of ``data`` would build more than the bounds allow."""
    values, chars = _weight(data)
    if cases > 1 and (values * cases > MAX_EXPANDED_VALUES or chars * cases > MAX_EXPANDED_CHARS):
        raise MatrixError(("matrix",), f"matrix expands to {cases} cases of {values} values and {chars} characters "
                                       f"each, more than {MAX_EXPANDED_VALUES} values or {MAX_EXPANDED_CHARS} "
                                       "characters in all; fewer cases, or a smaller file")


def product(axes: list[Axis]) -> list[tuple[str, dict[str, str], tuple[Override, ...]]]:
    """Every case: (name, {axis: label}, overrides). MatrixError when there are too many (:func:`check_size`)."""
    check_size(axes)
    cases = []
    for combo in itertools.product(*[[(a.name, label, ovs) for label, ovs in a.variants] for a in axes]):
        choice = tuple((axis, label) for axis, label, _ in combo)
        overrides = tuple(ov for _, _, ovs in combo for ov in ovs)
        cases.append((case_name(choice), dict(choice), overrides))
    return cases
