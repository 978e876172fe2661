"""Reading a scenario file's YAML: plain data plus the line and column of every key.

Only YAML's plain types are built (``yaml.SafeLoader``'s constructors): a ``!!python/...`` tag
is an error with its position, never an object. Duplicate keys are errors too, since YAML would
silently keep the last one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["MAX_BYTES", "Position", "Source", "SourceError", "read_source"]

# libyaml's parser when PyYAML has it (about 20x faster than the pure-Python one); same safe constructors.
_SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_BYTES = 1 << 20  # a scenario is a page of YAML; a bigger file is a mistake or an attack

Position = tuple[int, int]  # 1-based line and column
Path_ = tuple[Any, ...]


class SourceError(Exception):
    """A problem in the file itself (syntax, tags, duplicates), with its position."""

    def __init__(self, line: int, column: int, message: str) -> None:
        super().__init__(message)
        self.line, self.column, self.message = line, column, message


@dataclass(frozen=True)
class Source:
    path: Path
    data: dict[str, Any]
    positions: dict[Path_, Position]

    def position(self, loc: Path_) -> Position:
        """The position of the deepest part of ``loc`` that the file spells out."""
        for end in range(len(loc), -1, -1):
            pos = self.positions.get(tuple(loc[:end]))
            if pos is not None:
                return pos
        return (1, 1)


def _mark(node: yaml.Node) -> Position:
    return (node.start_mark.line + 1, node.start_mark.column + 1)


def _walk(node: yaml.Node, path: Path_, out: dict[Path_, Position]) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, yaml.Node] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key is None:
                raise SourceError(*_mark(key_node), "mapping keys must be plain strings")
            if key in seen:
                line, col = _mark(key_node)
                first = seen[key].start_mark.line + 1
                raise SourceError(line, col, f"duplicate key {key!r} (first given on line {first})")
            seen[key] = key_node
            out[path + (key,)] = _mark(key_node)
            _walk(value_node, path + (key,), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out[path + (i,)] = _mark(item)
            _walk(item, path + (i,), out)


def read_source(path: Path) -> Source:
    """Parse ``path`` into plain data with positions; raise SourceError or OSError."""
    raw = path.read_bytes()
    if len(raw) > MAX_BYTES:
        raise SourceError(1, 1, f"file is {len(raw)} bytes; a scenario is at most {MAX_BYTES}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(1, 1, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    loader = _SAFE_LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise SourceError(1, 1, "empty file: a scenario is a mapping with at least name, description, "
                                    "server, workload and builds")
        positions: dict[Path_, Position] = {}
        _walk(node, (), positions)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = exc.problem or exc.context or "invalid YAML"
        if isinstance(exc, yaml.constructor.ConstructorError) and "tag" in problem:
            problem = (f"{problem.strip()}: only plain YAML is allowed (mappings, lists, strings, "
                       "numbers, booleans, null)")
        raise SourceError(line, col, f"YAML error: {problem}") from None
    except yaml.YAMLError as exc:  # e.g. a reader error on control characters
        raise SourceError(1, 1, f"YAML error: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise SourceError(1, 1, "YAML nesting is too deep") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a {type(data).__name__}"
        raise SourceError(*_mark(node), f"top level must be a mapping of scenario fields, got {kind}")
    return Source(path=path, data=data, positions=positions)
