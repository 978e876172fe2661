"""Small text helpers with one owner each."""

from __future__ import annotations

__all__ = ["last_line"]


def last_line(text: str, limit: int = 300, empty: str = "(no output)") -> str:
    """The last non-blank line of ``text`` (stripped, at most ``limit`` characters), or ``empty``."""
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()[:limit]
    return empty
