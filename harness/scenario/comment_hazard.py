"""A warning for text that YAML silently drops: ``description: fixed by PR #29616`` keeps only "fixed by PR".

In a plain (unquoted) scalar, `` #`` starts a comment, so whatever follows is not part of the value. A comment
written on purpose reads ``# why``; a ``#`` glued to the next word (``#29616``, ``#issue``) is almost always
text the author meant to keep. ``validate`` names each such place; quoting the value keeps it.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from harness.util.bounded_read import ReadRefused, read_text

__all__ = ["comment_hazards"]

_GLUED_COMMENT = re.compile(r"^\s+#\S")


def _walk(node: yaml.Node, path: tuple[str, ...], lines: list[str], found: list[tuple[int, int, str, str]]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            _walk(value, (*path, str(getattr(key, "value", "?"))), lines, found)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*path, str(i)), lines, found)
    elif isinstance(node, yaml.ScalarNode) and node.style is None and node.tag == "tag:yaml.org,2002:str":
        end = node.end_mark
        rest = lines[end.line][end.column:] if end.line < len(lines) else ""
        if _GLUED_COMMENT.match(rest):
            found.append((end.line + 1, end.column + 1, ".".join(path), rest.strip()))


def comment_hazards(path: Path) -> list[str]:
    """``FILE:LINE:COL: field: warning: ...`` for each plain scalar followed on its line by `` #word``.
    The file is one ``validate`` has already read and bounded; an unreadable one gives no warning."""
    try:
        text = read_text(path, "source")
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except (OSError, ReadRefused, yaml.YAMLError):
        return []
    found: list[tuple[int, int, str, str]] = []
    if root is not None:
        _walk(root, (), text.splitlines(), found)
    return [f"{path}:{line}:{col}: {field}: warning: {excerpt[:40]!r} is a YAML comment, not part of the value; "
            "quote the value to keep it" for line, col, field, excerpt in found]
