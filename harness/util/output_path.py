"""The one safe-output check: every path the harness writes is a regular file or a folder, checked first.

A writer that renames a temporary file over its target replaces whatever the target was: as root,
``--output /dev/zero`` would replace the device with a JSON file; a writer that opens the target
follows a symbolic link out of the folder it means to write (``index.html -> /etc/passwd``). So each
output (``-o``, ``--out``, a store file, the dashboard folder, an export) is checked before any work:
an existing file must be a regular file (not a link, device, FIFO or socket), an existing folder a
folder, and the nearest existing folder on the way must accept new files. Refusals are UserError:
one line naming the flag and the path, exit 2, nothing started.

One rule for links (docs/safety.md): no path the harness writes under resolves through a symbolic link,
dangling or not -- not the output folder named by a flag, not a folder on the way to it, not a folder the
harness creates inside it (``runs/``, ``compare/``), not the store file, not the cache. A link to a larger
disk is named by its target instead. :func:`refuse_links` is the check; :func:`make_folder` creates a
folder under it, checking again once the folder exists (a link planted in between is caught).
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from harness.util.bounded_read import kind_of_mode
from harness.util.errors import UserError
from harness.util.paths import reports_root

__all__ = ["check_file_in", "check_out_root", "check_output_file", "check_output_folder", "make_folder", "nonempty",
           "refuse_links"]


# The output root (``--out``, else the default reports folder) is checked before anything starts: a run
# that only finds out at its end that it cannot write its result has spent a server start-up and lost it.

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


def first_link(path: Path) -> Path | None:
    """The first part of ``path`` (made absolute) that is a symbolic link, dangling or not; None if none is.

    Only parts that exist are looked at; a part that does not exist yet has nothing below it that does."""
    current = Path(os.path.abspath(path))  # abspath also folds "..", as the kernel would after a real folder
    parts = [current, *current.parents]
    for part in reversed(parts):  # from the root down: the first link is the one to name
        try:
            info = os.lstat(part)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError:
            return None  # unreadable: the writer's own error says so
        if stat.S_ISLNK(info.st_mode):
            return part
    return None


def refuse_links(path: Path, what: str) -> None:
    """UserError (exit 2) when ``path`` or a folder on the way to it is a symbolic link, dangling or not."""
    link = first_link(path)
    if link is not None:
        target = os.readlink(link) if os.path.islink(link) else "?"
        where = "is" if Path(os.path.abspath(path)) == link else f"lies under {link}, which is"
        raise UserError(f"{what} {path}: {where} a symbolic link (to {target}); the harness writes under no link "
                        "(docs/safety.md): give the real folder")


def make_folder(path: Path, what: str, *, exist_ok: bool = True) -> Path:
    """``path`` created as a folder (with its parents), none of them through a link; returns ``path``."""
    refuse_links(path, what)
    path.mkdir(parents=True, exist_ok=exist_ok)
    refuse_links(path, what)  # a link planted while the folders were made
    return path


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
    refuse_links(path, flag)
    check_file_in(path, flag)
    check_out_root(path.absolute().parent, flag=f"{flag} {path}: its folder")
    return path


def check_output_folder(path: Path | None, flag: str) -> Path:
    """An output folder (or the default reports root): a folder, or absent under one; returns it.

    Neither it nor a folder on the way may be a symbolic link (:func:`refuse_links`); the files written
    into it are checked one by one with :func:`check_file_in`.
    """
    if path is not None:
        nonempty(str(path), flag)
        refuse_links(path, flag)
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
    root = check_out_root(path, flag=flag)
    for folder in (root, *(root / sub for sub in _OWN_FOLDERS)):  # found now, before anything starts
        refuse_links(folder, flag if path is not None else "the reports folder")
    return root


# The folders commands create inside an output root (each run, comparison and bisection in its own below them).
_OWN_FOLDERS = ("runs", "compare", "bisect", "minimize", "results.db")
