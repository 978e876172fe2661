"""A warning for text that YAML silently drops: ``description: fixed by PR #29616`` keeps only "fixed by PR".

In a plain (unquoted) scalar, `` #`` starts a comment, so whatever follows is not part of the value. A comment
written on purpose reads ``# why``; a ``#`` glued to the next word (``#29616``, ``#issue``) is almost always
text the author meant to keep. ``validate`` names each such place; quoting the value keeps it.

The scenario reader (:mod:`harness.scenario.source`) notes where each plain string value ends as it walks the
document it has composed anyway; this module only looks at what follows on that line. (Composing each file a
second time in pure Python here was 16 of 19 profiled seconds of validating 1,000 files.)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CommentHazard", "find_hazards"]

_GLUED_COMMENT = re.compile(r"^\s+#\S")
# A text that could hold one: whitespace, then a #word somewhere (a cheap test before the text is split in lines;
# the plain values' ends then decide).
_CANDIDATE = re.compile(r"\s#\S")


@dataclass(frozen=True)
class CommentHazard:
    """A plain value at ``line``:``column`` (1-based, where it ends) of ``field`` followed by ``excerpt``."""

    line: int
    column: int
    field: str
    excerpt: str

    def message(self, path: Path) -> str:
        return (f"{path}:{self.line}:{self.column}: {self.field}: warning: {self.excerpt[:40]!r} is a YAML comment, "
                "not part of the value; quote the value to keep it")


def find_hazards(text: str, plain_ends: Sequence[tuple[int, int, tuple[Any, ...]]]) -> tuple[CommentHazard, ...]:
    """The hazards of ``text``, given where its plain string values end (0-based line and column, field path)."""
    if not plain_ends or not _CANDIDATE.search(text):
        return ()
    lines = text.splitlines()
    found = []
    for line, column, path in plain_ends:
        rest = lines[line][column:] if line < len(lines) else ""
        if _GLUED_COMMENT.match(rest):
            found.append(CommentHazard(line + 1, column + 1, ".".join(map(str, path)), rest.strip()))
    return tuple(found)
