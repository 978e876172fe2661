"""Writing a file so that a reader sees the old content or the new, never half of it."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

from harness.util.errors import UserError

__all__ = ["move_into", "replace_with", "write_atomic", "write_atomic_bytes"]


def _refuse_special(path: Path) -> None:
    # A rename over a device, FIFO or socket replaces that node (as root, /dev/zero); over a symbolic
    # link it replaces the link. Neither is a file the harness created, so neither is written.
    from harness.util.output_path import refuse_links

    # A folder on the way that is a link sends the file elsewhere ($SGLANG_REPRO_BASELINES -> /etc, a fixtures
    # folder -> another checkout): every writer checked its own flag or none; the writer checks every path.
    refuse_links(path.parent, "writing")
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        from harness.util.bounded_read import kind_of_mode

        raise UserError(f"{path}: {kind_of_mode(mode)}; the harness writes only regular files it creates or owns")


def replace_with(path: Path, write: Callable[[Path], object]) -> None:
    """Have ``write`` fill a temporary file beside ``path`` (one per process), then rename it over ``path``.

    The temporary name is created exclusively, not following links, so a link planted at that name
    cannot redirect the write; an existing ``path`` must be a regular file (UserError otherwise).
    """
    _refuse_special(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)  # a leftover of an earlier process with the same pid
    try:
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644))
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def move_into(source: Path, path: Path) -> None:
    """Put a file finished elsewhere (a downloaded wheel in its staging folder, on the same file system) at ``path``
    by one rename: a reader sees no file or the whole one; an existing ``path`` must be a regular file."""
    _refuse_special(path)
    os.replace(source, path)


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file beside it (one per process) and a rename."""
    replace_with(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_atomic_bytes(path: Path, data: bytes) -> None:
    """``write_atomic`` for bytes (a pickled answer a waiting process reads as soon as it appears)."""
    replace_with(path, lambda tmp: tmp.write_bytes(data))
