"""The output root (``--out``, else the default reports folder) checked before anything starts.

A run that only finds out at its end that it cannot write its result has spent a server start-up
and lost the result; so the folder is checked first, with one line and exit 2: it must be a folder
(or not exist yet, under a folder) that this process can create files in.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from harness.util.errors import UserError
from harness.util.paths import reports_root

__all__ = ["check_out_root"]


def _nearest_existing(path: Path) -> Path:
    """The deepest part of ``path`` that exists (as anything: a file, a folder, a dangling link)."""
    current = path
    while not os.path.lexists(current) and current.parent != current:
        current = current.parent
    return current


def _why(exc: OSError, where: Path) -> str:
    if exc.errno == errno.EROFS:
        return f"{where} is on a read-only file system"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"no permission to create files in {where}"
    if exc.errno == errno.ENOSPC:
        return f"no space left on the device of {where}"
    return f"cannot create files in {where} ({exc.strerror or exc})"


def check_out_root(out: Path | None, *, flag: str = "--out") -> Path:
    """The output root, after checking that files can be created there; raises UserError (exit 2).

    Creates nothing that stays: the nearest existing folder on the way is probed with a temporary
    folder, removed at once.
    """
    root = out if out is not None else reports_root()
    shown = f"{flag} {root}" if out is not None else f"the reports folder {root} (set {flag} or SGLANG_REPRO_REPORTS)"
    full = root.absolute()
    if any(len(part.encode("utf-8", "surrogateescape")) > 255 for part in full.parts):
        raise UserError(f"{shown}: a folder name is longer than 255 bytes")
    existing = _nearest_existing(full)
    if not existing.is_dir():
        what = "is an existing file" if existing == full else f"lies under {existing}, which is not a folder"
        raise UserError(f"{shown}: {what}; give a folder for the reports")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".sglang-repro-probe-", dir=existing))
    except OSError as exc:
        raise UserError(f"{shown}: {_why(exc, existing)}") from None
    return root
