"""Small text helpers with one owner each."""

from __future__ import annotations

__all__ = ["first_line", "last_line"]


def last_line(text: str, limit: int = 300, empty: str = "(no output)") -> str:
    """The last non-blank line of ``text`` (stripped, at most ``limit`` characters), or ``empty``."""
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()[:limit]
    return empty


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (a run's reason is one line), or its type's name."""
    text = str(exc)
    return text.splitlines()[0] if text else type(exc).__name__
