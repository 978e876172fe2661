"""One release's source text, whoever holds it: a wheel (:class:`harness.contract.wheels.WheelSources`) or an
installed ``sglang`` package directory (:class:`DirSources`, what pre-flight reads in a build's environment)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Protocol

from harness.util.bounded_read import read_bytes

__all__ = ["DirSources", "Sources", "lines_of"]


class Sources(Protocol):
    """The text of ``sglang/<path>`` in one release, or None where it has no such file."""

    def text(self, path: str) -> str | None: ...


class DirSources:
    """The sources of an installed ``sglang`` package (the directory holding its ``srt/``)."""

    def __init__(self, package: Path) -> None:
        self.package = package

    def text(self, path: str) -> str | None:
        file = self.package / path
        return read_bytes(file, "source").decode("utf-8", errors="replace") if file.is_file() else None


@lru_cache(maxsize=256)
def _split(text: str) -> tuple[str, ...]:
    return tuple(text.splitlines())


def lines_of(sources: Sources, path: str) -> tuple[str, ...] | None:
    """The file's lines (cached by content: a release's file is split once however many citations read it)."""
    text = sources.text(path)
    return None if text is None else _split(text)
