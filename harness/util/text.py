"""Small text helpers with one owner each."""

from __future__ import annotations

__all__ = ["first_line", "last_line", "shown"]


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


# Characters that reorder or hide what a terminal shows: the bidi embeddings, overrides and isolates ("Trojan source").
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")


def shown(text: str) -> str:
    """``text`` as it may reach a terminal: control characters (a newline that forges a verdict line, an escape sequence,
    NUL) and bidi controls written as escapes (``\\n``, ``\\x1b``, ``\\u202e``), everything else as it is."""
    if text.isprintable() and not _BIDI.intersection(text):
        return text
    return "".join(c if c.isprintable() and c not in _BIDI else repr(c)[1:-1] if ord(c) < 0x10000 else c for c in text)
