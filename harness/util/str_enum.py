"""The base of the harness's closed sets of words (outcomes, verdicts, directions, sources): a member is its
word wherever it is printed or written (``str()``, f-strings, JSON, the store), as ``enum.StrEnum`` is from
Python 3.11 on; the harness supports 3.10, which has no StrEnum."""

from __future__ import annotations

from enum import Enum

__all__ = ["StrEnum"]


class StrEnum(str, Enum):
    """A closed set of words; ``str(member)`` is the word, not ``Class.MEMBER``."""

    def __str__(self) -> str:
        return self.value
