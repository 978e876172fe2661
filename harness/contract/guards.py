"""Where a line of SGLang can run: the conditions around it, read from the syntax tree of the release's own source.

A line that acts (a copy, an assignment, a return) runs only where every condition around it holds: each enclosing
``if`` (in its ``else`` branch, the negation), ``while`` and ``elif``, and each earlier ``if ...: return`` /
``raise`` and ``assert`` of the blocks it sits in, up to its function's entry. :func:`reach_of` reads them with
:mod:`ast` (never line windows or indentation) and decides each for a case given as flag values: holds, cannot
hold, or "the case decides" (None). A condition on a derived flag, a value SGLang computes from its server
arguments, is followed to where it is set and where it is refused (:mod:`harness.contract.derived`): a guard the
case cannot satisfy makes the line *present-but-unreachable*, never the behaviour.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeVar

from harness.contract.sources import Sources

__all__ = ["SET", "UNKNOWN", "Guard", "Reach", "Resolver", "conditions_of", "function_nodes", "in_source_order", "key_of",
           "nodes_of", "reach_of", "tree_of"]


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


# A value the case does not fix (the condition then neither holds nor fails), and "some value, not None".
UNKNOWN: Any = _Marker("UNKNOWN")
SET: Any = _Marker("SET")


@lru_cache(maxsize=256)
def tree_of(text: str) -> ast.Module | None:
    """The syntax tree of a source file (cached by content); None where it does not parse."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


@lru_cache(maxsize=256)
def nodes_of(text: str) -> tuple[ast.AST, ...]:
    """Every node of the file's tree (walked once per file, however many readers look); not in source order:
    a reader that needs it sorts what it picked (:func:`in_source_order`)."""
    tree = tree_of(text)
    return () if tree is None else tuple(ast.walk(tree))


_N = TypeVar("_N", bound=ast.AST)


def in_source_order(nodes: Sequence[_N]) -> list[_N]:
    return sorted(nodes, key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))


def key_of(node: ast.AST) -> str | None:
    """The flag a name stands for: ``cfg.enable_unified_memory`` -> ``enable_unified_memory``; a call without
    arguments ``cuda_graph_fully_disabled()`` -> ``cuda_graph_fully_disabled()``; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call) and not node.args and not node.keywords:
        inner = key_of(node.func)
        return None if inner is None else inner + "()"
    return None


@dataclass(frozen=True)
class Guard:
    """One condition a line needs: as it must hold (``test``, source text), where it is, whether the case can
    satisfy it (True, False, None: the case's other flags decide) and, for a derived flag, the chain it was
    decided by (``file:line: what``, outermost last)."""

    test: str
    where: str
    holds: bool | None
    why: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"test": self.test, "where": self.where, "holds": self.holds, "why": list(self.why)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Guard:
        return cls(str(data["test"]), str(data["where"]), data["holds"], tuple(str(w) for w in data.get("why", ())))


@dataclass(frozen=True)
class Reach:
    """The line that acts (``file:line``), its function, and the guards between it and the function's entry."""

    line: str
    function: str | None
    guards: tuple[Guard, ...]

    @property
    def reachable(self) -> bool | None:
        """False where a guard cannot hold for the case; True where all hold; None where the case decides."""
        if any(g.holds is False for g in self.guards):
            return False
        return True if all(g.holds is True for g in self.guards) else None

    @property
    def status(self) -> str:
        return {False: "present-but-unreachable", True: "reachable", None: "reachable where the case's flags allow"}[
            self.reachable]

    def describe(self, short: bool = False) -> str:
        """In words: where, and what decides whether it runs (``short``: the deciding link of a chain only)."""
        blocking = [g for g in self.guards if g.holds is False]
        head = f"{self.line} in {self.function}" if self.function else self.line
        if blocking:
            g = blocking[0]
            why = (g.why[-1:] if short else g.why) or ("not for a Frozen-KV MTP draft",)
            return f"{head}: present-but-unreachable ({g.test} at {g.where} cannot hold: {'; '.join(why)})"
        return f"{head}: {self.status}" + "".join(f"; needs {g.test} ({g.where})" for g in self.guards
                                                    if not short or g.holds is None)

    def to_json(self) -> dict[str, object]:
        return {"line": self.line, "function": self.function, "status": self.status, "reachable": self.reachable,
                "guards": [g.to_json() for g in self.guards]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Reach:
        return cls(str(data["line"]), data.get("function"), tuple(Guard.from_json(g) for g in data["guards"]))


# A derived flag's decision: (value for the case, the chain it rests on) from the release's sources and the case.
Derivation = Callable[[Sources, Mapping[str, Any]], tuple[Any, tuple[str, ...]]]


class Resolver:
    """Decides conditions for one case in one release: flag values from ``env``, derived flags from ``derived``
    (computed once each, with the chain each rests on)."""

    def __init__(self, sources: Sources, env: Mapping[str, Any], derived: Mapping[str, Derivation] | None = None):
        self.sources = sources
        self.env = dict(env)
        self.derived = dict(derived or {})
        self._done: dict[str, tuple[Any, tuple[str, ...]]] = {}

    def lookup(self, node: ast.AST) -> tuple[Any, tuple[str, ...]]:
        text = ast.unparse(node)
        if text in self.env:
            return self.env[text], ()
        key = key_of(node)
        if key is None:
            return UNKNOWN, ()
        if key in self.env:
            return self.env[key], ()
        if key in self.derived:
            if key not in self._done:
                self._done[key] = self.derived[key](self.sources, self.env)
            return self._done[key]
        return UNKNOWN, ()

    def value(self, node: ast.AST) -> tuple[Any, tuple[str, ...]]:
        """The node's value for the case (UNKNOWN where the case does not fix it) and the chains it used."""
        if isinstance(node, ast.Constant):
            return node.value, ()
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            parts = [self.value(e) for e in node.elts]
            if any(v is UNKNOWN for v, _ in parts):
                return UNKNOWN, ()
            return tuple(v for v, _ in parts), tuple(w for _, why in parts for w in why)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner, why = self.truth(node.operand)
            return (UNKNOWN if inner is None else not inner), why
        if isinstance(node, ast.BoolOp):
            return self._boolop(node)
        if isinstance(node, ast.Compare):
            return self._compare(node)
        return self.lookup(node)

    def truth(self, node: ast.AST) -> tuple[bool | None, tuple[str, ...]]:
        value, why = self.value(node)
        if value is UNKNOWN:
            return None, why
        return (True if value is SET else bool(value)), why

    def _boolop(self, node: ast.BoolOp) -> tuple[Any, tuple[str, ...]]:
        decisive = isinstance(node.op, ast.Or)  # an Or is decided by one True, an And by one False
        parts = [self.truth(v) for v in node.values]
        for value, why in parts:
            if value is decisive:
                return decisive, why
        if all(v is not None for v, _ in parts):
            return not decisive, tuple(w for _, why in parts for w in why)
        return UNKNOWN, ()

    def _compare(self, node: ast.Compare) -> tuple[Any, tuple[str, ...]]:
        left, why = self.value(node.left)
        chains = list(why)
        for op, right_node in zip(node.ops, node.comparators):
            right, why = self.value(right_node)
            chains += why
            result = _apply(op, left, right)
            if result is UNKNOWN:
                return UNKNOWN, ()
            if not result:
                return False, tuple(chains)
            left = right
        return True, tuple(chains)


def _apply(op: ast.cmpop, left: Any, right: Any) -> Any:
    if isinstance(op, (ast.Is, ast.IsNot)) and right is None and left is SET:
        return isinstance(op, ast.IsNot)
    if left is UNKNOWN or right is UNKNOWN or left is SET or right is SET:
        return UNKNOWN
    try:
        if isinstance(op, ast.Eq):
            return left == right
        if isinstance(op, ast.NotEq):
            return left != right
        if isinstance(op, ast.In):
            return left in right
        if isinstance(op, ast.NotIn):
            return left not in right
        if isinstance(op, ast.Is):
            return left is right
        if isinstance(op, ast.IsNot):
            return left is not right
        if isinstance(op, ast.Lt):
            return left < right
        if isinstance(op, ast.LtE):
            return left <= right
        if isinstance(op, ast.Gt):
            return left > right
        if isinstance(op, ast.GtE):
            return left >= right
    except TypeError:
        return UNKNOWN
    return UNKNOWN


@dataclass(frozen=True)
class _Condition:
    node: ast.expr
    negated: bool
    first: int
    last: int


def _exits(body: Sequence[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


def _earlier(stmt: ast.stmt) -> _Condition | None:
    """What an earlier statement of the same block demands of the lines after it: ``if T: return`` -> not T."""
    if isinstance(stmt, ast.If) and not stmt.orelse and _exits(stmt.body):
        return _Condition(stmt.test, True, stmt.test.lineno, stmt.test.end_lineno or stmt.test.lineno)
    if isinstance(stmt, ast.Assert):
        return _Condition(stmt.test, False, stmt.lineno, stmt.end_lineno or stmt.lineno)
    return None


def _blocks(stmt: ast.stmt, line: int) -> tuple[list[ast.stmt], _Condition | None] | None:
    """The block of ``stmt`` holding ``line`` and the condition entering it demands, or None (``line`` is in the
    statement's own header or expression)."""
    def inside(body: Sequence[ast.stmt]) -> bool:
        return bool(body) and body[0].lineno <= line <= (body[-1].end_lineno or body[-1].lineno)

    if isinstance(stmt, (ast.If, ast.While)):
        test = stmt.test
        cond = _Condition(test, False, test.lineno, test.end_lineno or test.lineno)
        if inside(stmt.body):
            return stmt.body, cond
        if inside(stmt.orelse):
            return stmt.orelse, _Condition(test, True, cond.first, cond.last)
        return None
    bodies: list[list[ast.stmt]] = []
    if isinstance(stmt, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
        bodies = [stmt.body, stmt.orelse] if isinstance(stmt, (ast.For, ast.AsyncFor)) else [stmt.body]
    elif isinstance(stmt, ast.Try):
        bodies = [stmt.body, *[h.body for h in stmt.handlers], stmt.orelse, stmt.finalbody]
    elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        bodies = [stmt.body]
    for body in bodies:
        if inside(body):
            return body, None
    return None


def conditions_of(tree: ast.Module, line: int) -> tuple[str | None, list[_Condition], ast.stmt | None]:
    """The innermost function (qualified name) holding ``line``, the conditions between its entry and the
    statement at ``line``, and that statement."""
    qual: list[str] = []
    conds: list[_Condition] = []
    body: list[ast.stmt] = list(tree.body)
    while True:
        stmt = next((s for s in body if s.lineno <= line <= (s.end_lineno or s.lineno)), None)
        if stmt is None:
            return (".".join(qual) or None), conds, None
        conds += [c for s in body if (s.end_lineno or s.lineno) < line and (c := _earlier(s)) is not None]
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            qual.append(stmt.name)
            conds = []  # only the conditions inside the function: up to its entry
        inner = _blocks(stmt, line)
        if inner is None:
            return (".".join(qual) or None), conds, stmt
        body, cond = inner
        if cond is not None:
            conds.append(cond)


def function_nodes(nodes: Sequence[ast.AST], name: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every def called ``name`` among a file's nodes (:func:`nodes_of`: any class, any depth)."""
    return [n for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]


def _text(cond: _Condition) -> str:
    if not cond.negated:
        return ast.unparse(cond.node)
    if isinstance(cond.node, ast.UnaryOp) and isinstance(cond.node.op, ast.Not):
        return ast.unparse(cond.node.operand)
    return f"not ({ast.unparse(cond.node)})"


def reach_of(path: str, tree: ast.Module, line: int, resolver: Resolver, offset: int = 0,
             outer: str | None = None) -> Reach:
    """The guards of the statement at ``line`` of ``path`` (its function's own conditions), each decided for
    the resolver's case. ``tree`` may be one function's source alone: ``offset`` is the number of file lines above
    it, ``outer`` the qualified name of what holds it."""
    function, conds, _ = conditions_of(tree, line)
    if outer and function:
        function = f"{outer}.{function}"
    guards = []
    for cond in conds:
        value, why = resolver.truth(cond.node)
        holds = None if value is None else (not value if cond.negated else value)
        first, last = cond.first + offset, cond.last + offset
        guards.append(Guard(_text(cond), f"{path}:{first}" if first == last else f"{path}:{first}-{last}", holds, why))
    return Reach(f"{path}:{line + offset}", function, tuple(guards))
