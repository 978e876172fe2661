"""Reading a scenario file's YAML: plain data plus the line and column of every key.

Only YAML's plain types are built (``yaml.SafeLoader``'s constructors): a ``!!python/...`` tag
is an error with its position, never an object. Duplicate keys are errors too, since YAML would
silently keep the last one.

A scenario is a page of YAML, so everything about reading one is bounded: only regular files are
opened (a FIFO or ``/dev/zero`` is refused before a byte is read), the size is checked before
reading, and the document, with every alias (``*name``) expanded as the data will be used, may hold
at most :data:`MAX_NODES` values, :data:`MAX_DEPTH` levels and :data:`MAX_CHARS` characters of text.
YAML aliases make a 300-byte file stand for gigabytes ("billion laughs"); the walk that records
positions counts each alias every time it is used, so such a file stops at the bound, in milliseconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.scenario.comment_hazard import CommentHazard, find_hazards
from harness.scenario.errors import excerpt
from harness.util.bounded_read import CAPS, ReadRefused, read_bytes
from harness.util.yaml_loaders import LIBYAML

__all__ = ["MAX_BYTES", "MAX_CHARS", "MAX_DEPTH", "MAX_NODES", "Position", "Source", "SourceError", "read_source"]

MAX_BYTES = CAPS["scenario"]
MAX_NODES = 20_000  # values after alias expansion (the seed scenarios have about 100)
MAX_DEPTH = 32  # nesting levels (the format itself needs 5)
MAX_CHARS = 4 * MAX_BYTES  # characters of text after alias expansion

Position = tuple[int, int]  # 1-based line and column
Path_ = tuple[Any, ...]

_YAML = "tag:yaml.org,2002:"
_SCALAR_TAGS = frozenset(_YAML + t for t in ("str", "int", "float", "bool", "null", "timestamp", "merge"))
_STR, _MAP, _SEQ, _MERGE = (_YAML + t for t in ("str", "map", "seq", "merge"))
_PLAIN = "only plain YAML is allowed (mappings, lists, strings, numbers, booleans, null)"
# Neither a process argument, an environment value nor a UTF-8 file can carry these.
_UNCARRIABLE = re.compile("[\x00\ud800-\udfff]")
_MAX_INT_BITS = 63


class SourceError(Exception):
    """A problem in the file itself (syntax, tags, duplicates, bounds), with its position."""

    def __init__(self, line: int, column: int, message: str, field: str = "") -> None:
        super().__init__(message)
        self.line, self.column, self.message, self.field = line, column, message, field


@dataclass(frozen=True)
class Source:
    path: Path
    data: dict[str, Any]
    positions: dict[Path_, Position]
    # Plain values followed on their line by a glued ``#word`` that YAML dropped as a comment (validate warns).
    hazards: tuple[CommentHazard, ...] = ()

    def position(self, loc: Path_) -> Position:
        """The position of the deepest part of ``loc`` that the file spells out."""
        for end in range(len(loc), -1, -1):
            try:
                pos = self.positions.get(tuple(loc[:end]))
            except TypeError:  # an unhashable part (pydantic can name a list as a dict key)
                continue
            if pos is not None:
                return pos
        return (1, 1)


def _mark(node: yaml.Node) -> Position:
    return (node.start_mark.line + 1, node.start_mark.column + 1)


def _tag(tag: str) -> str:
    return excerpt("!!" + tag.removeprefix(_YAML) if tag.startswith(_YAML) else tag, quote=False)


def _dotted(path: Path_) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(path))


def _fail(node: yaml.Node, path: Path_, message: str) -> SourceError:
    return SourceError(*_mark(node), message, field=_dotted(path))


def _read_bounded(path: Path) -> bytes:
    """The file's bytes, through the one bounded reader: only a regular file of at most MAX_BYTES. Raises SourceError."""
    try:
        return read_bytes(path, "scenario")
    except ReadRefused as exc:
        raise SourceError(1, 1, f"{exc.reason} (a scenario is a regular *.yaml file)") from None


def _line_col(text: str, index: int) -> Position:
    index = max(0, min(index, len(text)))
    return (text.count("\n", 0, index) + 1, index - (text.rfind("\n", 0, index) + 1) + 1)


def _encodable(text: str) -> bool:
    """True when ``text`` holds no lone surrogate (a scan of the whole text in C; the regex is 50x slower)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _Walker:
    """Records every key's position and checks the bounds, expanding aliases as the data will; and builds
    the data on the way, where the document is plain enough for that to be what SafeConstructor builds.

    ``text`` (the document's text) lets the walk skip two checks that text shows cannot fire: without a ``*``
    no node is an alias, and without a backslash no scalar can hold a NUL or a lone surrogate (only a quoted
    scalar's escape can put one there: the reader refuses them as characters)."""

    def __init__(self, loader: yaml.SafeLoader | yaml.CSafeLoader, text: str | None = None) -> None:
        self.loader = loader
        self.positions: dict[Path_, Position] = {}
        self.nodes = 0
        self.chars = 0
        self.scalars_checked: set[int] = set()
        self.collections_seen: set[int] = set()
        self.plain_ends: list[tuple[int, int, Path_]] = []  # where each plain string value ends (comment_hazard)
        # False once the document holds what the walk does not build as SafeConstructor would: an alias
        # (the constructor shares one object between its uses) or a merge key (``<<``). Its data is then
        # the constructor's own.
        self.built = True
        self.aliases_possible = text is None or "*" in text
        self.uncarriable_possible = text is None or "\\" in text or "\x00" in text or not _encodable(text)

    def walk(self, node: yaml.Node, path: Path_, depth: int) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _fail(node, path, f"more than {MAX_NODES} values once aliases (*name) are expanded; "
                                    "a scenario is a page of YAML")
        if depth > MAX_DEPTH:
            raise _fail(node, path, f"nested more than {MAX_DEPTH} levels deep")
        if isinstance(node, yaml.ScalarNode):
            if not node.style and node.tag == _STR:  # plain: PyYAML says None, libyaml ""
                end = node.end_mark
                self.plain_ends.append((end.line, end.column, path))
            return self._scalar(node, path)
        if isinstance(node, yaml.MappingNode):
            self._seen(node)
            if node.tag != _MAP:
                raise _fail(node, path, f"tag {_tag(node.tag)} is not allowed: {_PLAIN}")
            return self._mapping(node, path, depth)
        if isinstance(node, yaml.SequenceNode):
            self._seen(node)
            if node.tag != _SEQ:
                raise _fail(node, path, f"tag {_tag(node.tag)} is not allowed: {_PLAIN}")
            items = []
            positions, walk = self.positions, self.walk
            for i, item in enumerate(node.value):
                sub = path + (i,)
                mark = item.start_mark
                positions[sub] = (mark.line + 1, mark.column + 1)
                items.append(walk(item, sub, depth + 1))
            return items
        return None

    def _seen(self, node: yaml.Node) -> None:
        if self.aliases_possible:
            if id(node) in self.collections_seen:
                self.built = False  # an alias of a list or mapping
            self.collections_seen.add(id(node))

    def _mapping(self, node: yaml.MappingNode, path: Path_, depth: int) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        data: dict[Any, Any] = {}
        positions, walk, scalar = self.positions, self.walk, self._scalar
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise _fail(key_node, path, "mapping keys must be plain strings")
            built_key = scalar(key_node, path)
            key = key_node.value
            if key in seen:
                first = seen[key].start_mark.line + 1
                raise _fail(key_node, path + (key,), f"duplicate key {excerpt(key)} (first given on line {first})")
            seen[key] = key_node
            sub = path + (key,)
            mark = key_node.start_mark
            positions[sub] = (mark.line + 1, mark.column + 1)
            data[built_key] = walk(value_node, sub, depth + 1)
        return data

    def _scalar(self, node: yaml.ScalarNode, path: Path_) -> Any:
        value = node.value
        self.chars += len(value)
        if self.chars > MAX_CHARS:
            raise _fail(node, path, f"more than {MAX_CHARS} characters of text once aliases (*name) "
                                    "are expanded; a scenario is a page of YAML")
        if self.aliases_possible:
            if id(node) in self.scalars_checked:  # an alias of a scalar already checked
                self.built = False
                return None
            self.scalars_checked.add(id(node))
        tag = node.tag
        if tag == _STR:  # a string is always its own valid value
            if self.uncarriable_possible:
                self._carriable(node, path)
            return value
        if tag not in _SCALAR_TAGS:
            raise _fail(node, path, f"tag {_tag(tag)} is not allowed: {_PLAIN}")
        if self.uncarriable_possible:
            self._carriable(node, path)
        if tag == _MERGE:
            self.built = False
            return None
        key = (tag, value)
        built = _CONSTRUCTED.get(key, _MISSING)
        if built is not _MISSING:
            return built
        try:
            built = self.loader.construct_object(node)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError, yaml.YAMLError):
            raise _fail(node, path, f"{excerpt(value)} is not a valid {_tag(tag)} value") from None
        if isinstance(built, int) and not isinstance(built, bool) and built.bit_length() > _MAX_INT_BITS:
            raise _fail(node, path, f"integer {excerpt(value)} is out of range (at most 63 bits)")
        if type(built) in _IMMUTABLE and len(_CONSTRUCTED) < _CONSTRUCTED_MAX and len(value) <= _RESOLVED_TEXT:
            _CONSTRUCTED[key] = built
        return built

    @staticmethod
    def _carriable(node: yaml.ScalarNode, path: Path_) -> None:
        bad = _UNCARRIABLE.search(node.value)
        if bad:
            what = "a NUL character" if bad.group() == "\x00" else f"a lone surrogate U+{ord(bad.group()):04X}"
            raise _fail(node, path, f"{excerpt(node.value)} contains {what}, which no command line, "
                                    "environment or file can carry")


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that stops composing past MAX_NODES nodes or MAX_DEPTH levels.

    PyYAML composes the whole document before anything else sees it, in pure Python: a 1 MiB list
    takes seconds, and nesting recurses once per level. Counting here keeps both bounded.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.composed = 0
        self.depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self.composed += 1
        self.depth += 1
        try:
            if self.composed > MAX_NODES or self.depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                what = (f"more than {MAX_NODES} keys and values" if self.composed > MAX_NODES
                        else f"nested more than {MAX_DEPTH} levels deep")
                raise SourceError(mark.line + 1, mark.column + 1, f"{what}; a scenario is a page of YAML")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


_LIBYAML = LIBYAML
# A file this small cannot hold enough nodes to cost more than milliseconds to compose in C (at most one
# node per 2 bytes); the walk then applies the bounds. A bigger file is composed by the pure-Python loader,
# which stops at the bounds while composing.
_LIBYAML_MAX_CHARS = 64 * 1024


# Implicit tags already resolved, by (node kind, scalar text, implicit flags): libyaml's composer calls the
# Python resolver for every scalar (a third of a scenario's parse), and scenario files repeat their keys and
# values. Short texts only, and a bounded number of them, so the cache stays small whatever is read.
_RESOLVED: dict[tuple[Any, Any, Any], str] = {}
_RESOLVED_MAX, _RESOLVED_TEXT = 8192, 64
# Likewise the values of short non-string scalars (``8``, ``true``, ``0.5``, ``null``): SafeConstructor builds
# them as a pure function of tag and text, and only immutable ones are kept, so a value is never shared mutably.
_CONSTRUCTED: dict[tuple[str, str], Any] = {}
_CONSTRUCTED_MAX = 8192
_IMMUTABLE = frozenset({int, float, bool, type(None)})
_MISSING = object()


class _CLoader(yaml.CSafeLoader):
    """libyaml's parser and composer (about 10x faster than PyYAML's scanner), SafeConstructor's types."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        # A pure function here: SafeLoader's implicit resolvers are fixed per class, and it has no path
        # resolvers (which would make a tag depend on where the node sits).
        if value is None and not self.yaml_path_resolvers:  # a list or mapping: its tag does not depend on text
            return _SEQ if kind is yaml.SequenceNode else _MAP if kind is yaml.MappingNode else str(
                super().resolve(kind, value, implicit))
        if self.yaml_path_resolvers or (value is not None and len(value) > _RESOLVED_TEXT):
            return str(super().resolve(kind, value, implicit))
        key = (kind, value, implicit)
        tag = _RESOLVED.get(key)
        if tag is None:
            tag = str(super().resolve(kind, value, implicit))
            if len(_RESOLVED) < _RESOLVED_MAX:
                _RESOLVED[key] = tag
        return tag


def _parse(path: Path, text: str) -> Source:
    """libyaml first for a small file; a file it finds fault with is read again by PyYAML's own loader, so
    an error says exactly what (and where) it always said, whatever libyaml's wording would be."""
    if _LIBYAML and len(text) <= _LIBYAML_MAX_CHARS:
        try:
            return _parse_with(_CLoader, path, text)
        except SourceError:
            pass
    return _parse_with(_BoundedLoader, path, text)


def _parse_with(make_loader: type[_CLoader] | type[_BoundedLoader], path: Path, text: str) -> Source:
    try:
        loader = make_loader(text)
    except yaml.reader.ReaderError as exc:  # a control character: checked as the reader is built
        line, col = _line_col(text, exc.position)
        raise SourceError(line, col, f"character U+{exc.character:04X} is not allowed in a YAML file "
                                     "(control characters are not text)") from None
    try:
        node = loader.get_single_node()
        if node is None:
            raise SourceError(1, 1, "empty file: a scenario is a mapping with at least name, description, "
                                    "server, workload and builds")
        walker = _Walker(loader, text)
        data = walker.walk(node, (), 0)
        if not walker.built:
            data = loader.construct_document(node)
    except yaml.reader.ReaderError as exc:
        line, col = _line_col(text, exc.position)
        raise SourceError(line, col, f"character U+{exc.character:04X} is not allowed in a YAML file") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = excerpt(exc.problem or exc.context or "invalid YAML", limit=160, quote=False)
        if isinstance(exc, yaml.constructor.ConstructorError) and "tag" in problem:
            problem = f"{problem.strip()}: {_PLAIN}"
        raise SourceError(line, col, f"YAML error: {problem}") from None
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SourceError(1, 1, f"YAML error: {excerpt(first, limit=160, quote=False)}") from None
    except RecursionError:  # the composer recurses per nesting level, before the walk can count them
        raise SourceError(1, 1, f"YAML nesting is too deep (at most {MAX_DEPTH} levels)") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a {type(data).__name__}"
        raise SourceError(*_mark(node), f"top level must be a mapping of scenario fields, got {kind}")
    return Source(path=path, data=data, positions=walker.positions, hazards=find_hazards(text, walker.plain_ends))


def read_source(path: Path) -> Source:
    """Parse ``path`` into plain data with positions; raise SourceError or OSError."""
    raw = _read_bounded(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start].decode("utf-8", "replace")
        line, col = _line_col(before, len(before))
        raise SourceError(line, col, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return _parse(path, text)
