"""Writing a file so that a reader sees the old content or the new, never half of it."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file beside it (one per process) and a rename."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
