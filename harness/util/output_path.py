"""The one safe-output check: every path the harness writes is a regular file or a folder, checked first.

A writer that renames a temporary file over its target replaces whatever the target was: as root,
``--output /dev/zero`` would replace the device with a JSON file; a writer that opens the target
follows a symbolic link out of the folder it means to write (``index.html -> /etc/passwd``). So each
output (``-o``, ``--out``, a store file, the dashboard folder, an export) is checked before any work:
an existing file must be a regular file (not a link, device, FIFO or socket), an existing folder a
folder, and the nearest existing folder on the way must accept new files. Refusals are UserError:
one line naming the flag and the path, exit 2, nothing started.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from harness.commands._output import check_out_root
from harness.util.bounded_read import kind_of_mode
from harness.util.errors import UserError

__all__ = ["check_file_in", "check_output_file", "check_output_folder", "nonempty"]


def nonempty(value: str | os.PathLike[str] | None, flag: str) -> None:
    """An empty path is bad input, not the current folder (``Path('')`` is ``.``)."""
    if value is not None and not os.fspath(value).strip():
        raise UserError(f"{flag}: empty; give a path")


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None  # absent, or under a file: the folder check that follows says which
    except OSError as exc:
        raise UserError(f"{path}: cannot look at it ({exc.strerror or exc})") from None


def check_file_in(path: Path, what: str) -> None:
    """``path`` (about to be written) is absent or a regular file: never a link, device, FIFO or socket."""
    info = _lstat(path)
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise UserError(f"{what} {path}: {kind_of_mode(info.st_mode)}; the harness writes only regular files "
                        "it creates or owns")


def check_output_file(path: Path, flag: str) -> Path:
    """An output file: absent or a regular file, under a folder that accepts new files; returns ``path``."""
    nonempty(str(path) if path is not None else None, flag)
    if path.name in ("", ".", ".."):
        raise UserError(f"{flag} {path}: a folder; give a file name")
    check_file_in(path, flag)
    check_out_root(path.absolute().parent, flag=f"{flag} {path}: its folder")
    return path


def check_output_folder(path: Path | None, flag: str) -> Path:
    """An output folder (or the default reports root): a folder, or absent under one; returns it.

    The folder itself may be a symbolic link to a folder (a reports root on a larger disk is common);
    the files written into it are checked one by one with :func:`check_file_in`.
    """
    if path is not None:
        nonempty(str(path), flag)
        try:
            info: os.stat_result | None = os.lstat(path)
        except OSError:
            info = None  # absent, or not reachable (a file on the way, a name too long): check_out_root says which
        if info is not None and not stat.S_ISDIR(info.st_mode):
            try:
                target = os.stat(path)
            except OSError:
                target = None
            if target is None or not stat.S_ISDIR(target.st_mode):
                raise UserError(f"{flag} {path}: {kind_of_mode(info.st_mode)}; give a folder")
    return check_out_root(path, flag=flag)
