"""The one bounded reader: every file the harness reads, read as a regular file of a capped size.

A path given by a user can name anything: ``/dev/zero`` (endless), a FIFO (an open that waits for a
writer forever), a folder, a socket, or a JSON line nested 200k levels deep (a ``RecursionError`` in
the decoder). So a file is opened without blocking and without following it to a terminal, checked
to be a regular file on the open descriptor (no race with a rename), and read up to the cap of its
kind; JSON is decoded with a depth cap; folders are walked with a bound on entries and depth. Every
refusal is a :class:`ReadRefused` (a UserError: one line naming the file, exit 2).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Generator, Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any, BinaryIO

from harness.util.errors import UserError

__all__ = ["CAPS", "JSON_MAX_DEPTH", "WALK_MAX_DEPTH", "WALK_MAX_ENTRIES", "ReadRefused", "iter_lines", "kind_of_mode",
           "load_json", "open_regular", "read_bytes", "read_head", "read_json", "read_tail", "read_text", "tail_lines",
           "walk_files"]

# Caps per kind of file, in bytes: each is well above what the harness itself writes (a result.json is a
# few kB, a catalogue tens of kB, a requests.jsonl of a long workload tens of MB) and far below memory.
CAPS: dict[str, int] = {
    "record": 16 << 20,  # result.json, report.json
    "catalogue": 4 << 20,  # harness/data/signatures.yaml, a project's own catalogue files
    "requests": 512 << 20,  # requests.jsonl
    "log": 1 << 30,  # server.log (scanned as a stream, line by line, elsewhere; this cap is for whole reads)
    "state": 16 << 20,  # bisect state, caches
    "fixture": 16 << 20,  # a prompt fixture text (the project's are a few kB; a long context is about 1 MB)
    "source": 16 << 20,  # a build's source files, fixtures, scenarios read whole
    "config": 1 << 20,  # sglang-repro.toml, a pyproject.toml read for its [tool.sglang-repro] table
    "scenario": 1 << 20,  # a scenario is a page of YAML; a bigger file is a mistake or an attack
    "wheel": 1 << 30,  # a release's wheel in the cache (sglang's are ~12 MB), opened as a zip archive
    "kernel": 1 << 20,  # /proc/<pid>/stat and environ, /proc/cpuinfo: the kernel's, sized 0 by stat, read to the end
    "model": 64 << 20,  # a tiny model's weights and tokenizer files, made at run time for the real-SGLang CPU build
}
JSON_MAX_DEPTH = 64  # the harness's own JSON nests at most 6 levels
WALK_MAX_ENTRIES = 200_000  # folder entries looked at by one walk (a reports tree of a year is ~50k)
WALK_MAX_DEPTH = 16  # folder levels below the root (reports/runs/<id>/result.json is 3)


class ReadRefused(UserError):
    """A file the harness was asked to read is not one it will read: one line, exit 2.

    ``reason`` is the line without the file's name, for a caller that names the file its own way (a scenario's
    errors read ``FILE:LINE:COL: ...``)."""

    def __init__(self, where: object, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.reason = reason


def kind_of_mode(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISLNK, "a symbolic link"), (stat.S_ISREG, "an existing file")):
        if test(mode):
            return name
    return "not a regular file or folder"


_KERNEL_DEVICES: frozenset[int] | None = None


def _kernel_devices() -> frozenset[int]:
    """The devices of the kernel's pseudo file systems (procfs, sysfs): only the ``kernel`` kind reads them."""
    global _KERNEL_DEVICES
    if _KERNEL_DEVICES is None:
        devices = set()
        for root in ("/proc", "/sys"):
            with suppress(OSError):
                if os.path.ismount(root):
                    devices.add(os.stat(root).st_dev)
        _KERNEL_DEVICES = frozenset(devices)
    return _KERNEL_DEVICES


def _open_regular(path: Path, kind: str, *, whole: bool = True) -> int:
    """A descriptor of ``path`` once it is known to be a regular file within the cap of its kind (only when it is
    to be read ``whole``: a window of it is bounded by the window)."""
    cap = CAPS[kind] if whole else None
    try:
        # O_NONBLOCK: opening a FIFO would otherwise wait for a writer; O_NOCTTY: a terminal never becomes ours.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise ReadRefused(path, "no such file") from None
    except OSError as exc:
        raise ReadRefused(path, f"cannot open ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ReadRefused(path, f"{kind_of_mode(info.st_mode)}, not a regular file; refused")
        if kind != "kernel" and info.st_dev in _kernel_devices():
            # /proc/self/environ is a "regular file" of size 0 that holds every secret of the environment
            raise ReadRefused(path, "a file of the kernel's (/proc, /sys), not a log or a file of yours; refused")
        if cap is not None and info.st_size > cap:
            raise ReadRefused(path, f"{info.st_size} bytes, over the {cap}-byte cap for a {kind} file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(path: Path, kind: str) -> BinaryIO:
    """A binary file object of ``path``, once it is known to be a regular file within ``CAPS[kind]``: for a reader
    that seeks (``zipfile``), which must never be handed a FIFO (it waits for ever) or ``/dev/zero`` (endless)."""
    return os.fdopen(_open_regular(path, kind), "rb")


def iter_lines(path: Path, kind: str, *, max_line: int = 1 << 20) -> Generator[bytes, None, None]:
    """The lines of a regular file of at most ``CAPS[kind]`` bytes, each cut at ``max_line`` bytes (a log
    with no newline in a gigabyte is read a megabyte at a time, never whole)."""
    cap = CAPS[kind]
    fd = _open_regular(path, kind)
    with os.fdopen(fd, "rb") as fh:
        size = 0
        while True:
            try:
                line = fh.readline(max_line)
            except OSError as exc:
                raise ReadRefused(path, f"cannot read ({exc.strerror or exc})") from None
            if not line:
                return
            size += len(line)
            if size > cap:
                raise ReadRefused(path, f"grew past the {cap}-byte cap for a {kind} file while being read")
            yield line


def read_bytes(path: Path, kind: str) -> bytes:
    """The bytes of ``path``, a regular file of at most ``CAPS[kind]`` bytes; ReadRefused otherwise."""
    cap = CAPS[kind]
    fd = _open_regular(path, kind)
    try:
        chunks: list[bytes] = []
        size = 0
        while size <= cap:  # the file may grow while it is read
            chunk = os.read(fd, min(1 << 20, cap + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise ReadRefused(path, f"cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if size > cap:
        raise ReadRefused(path, f"grew past the {cap}-byte cap for a {kind} file while being read")
    return b"".join(chunks)


def _read_window(path: Path, kind: str, max_bytes: int, *, from_end: bool = False, start: int = 0) -> bytes:
    """At most ``max_bytes`` from the start or the end of ``path`` (no cap on the file itself: only the window is
    read, so a log of any size is fine); the open refuses what is not a regular file, as every read here does."""
    fd = _open_regular(path, kind, whole=False)  # the window bounds the read, not the file (a log keeps growing)
    try:
        if from_end:
            size = os.fstat(fd).st_size
            os.lseek(fd, max(0, size - max_bytes), os.SEEK_SET)
        elif start:
            os.lseek(fd, start, os.SEEK_SET)
        chunks: list[bytes] = []
        left = max_bytes
        while left > 0:
            chunk = os.read(fd, min(1 << 20, left))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise ReadRefused(path, f"cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def read_tail(path: Path, kind: str, max_bytes: int = 256 << 10) -> bytes:
    """The last ``max_bytes`` of a regular file (a log's tail); ReadRefused for anything else."""
    return _read_window(path, kind, max_bytes, from_end=True)


def read_from(path: Path, kind: str, offset: int) -> bytes:
    """A regular file from byte ``offset`` on, at most ``CAPS[kind]`` bytes (a trial's part of a shared log)."""
    fd = _open_regular(path, kind, whole=False)
    os.close(fd)
    return _read_window(path, kind, CAPS[kind], start=offset)


def read_head(path: Path, kind: str, max_bytes: int) -> bytes:
    """The first ``max_bytes`` of a regular file (a log's start-up lines); ReadRefused for anything else."""
    return _read_window(path, kind, max_bytes, from_end=False)


def tail_lines(path: Path, n_lines: int, *, kind: str = "log", max_bytes: int = 256 << 10,
               skip_blank: bool = False) -> list[str]:
    """The one log-tail reader: the last ``n_lines`` lines of a file (only its last ``max_bytes`` are read),
    decoded with bad bytes replaced; ``[]`` when the file is absent or not a regular file (a tail explains
    a failure; it must never become one)."""
    try:
        data = read_tail(path, kind, max_bytes)
    except (ReadRefused, OSError):
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    if skip_blank:
        lines = [line for line in lines if line.strip()]
    return lines[-n_lines:] if n_lines > 0 else []


def read_text(path: Path, kind: str) -> str:
    """:func:`read_bytes` decoded as UTF-8; ReadRefused for bytes that are not UTF-8."""
    data = read_bytes(path, kind)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReadRefused(path, f"not UTF-8 text (byte {exc.start})") from None


def _depth(value: Any, limit: int) -> int:
    """The nesting depth of a decoded JSON value, walked without recursion; stops past ``limit``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def load_json(text: str | bytes, source: str, *, max_depth: int = JSON_MAX_DEPTH) -> Any:
    """Decode JSON nested at most ``max_depth`` levels; ReadRefused naming ``source`` otherwise.

    The C decoder recurses once per level and raises RecursionError near the interpreter's limit
    (about 1000); anything between ``max_depth`` and that is refused after decoding, before any
    recursive consumer sees it. NaN and Infinity are JSON extensions Python accepts; they are kept
    (the harness writes NaN for a metric it could not compute) and judged by the consumer.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        raise ReadRefused(source, f"JSON nested deeper than {max_depth} levels") from None
    except ValueError as exc:
        raise ReadRefused(source, f"not JSON ({exc})") from None
    if _depth(value, max_depth) > max_depth:
        raise ReadRefused(source, f"JSON nested deeper than {max_depth} levels")
    return value


def read_json(path: Path, kind: str, *, max_depth: int = JSON_MAX_DEPTH) -> Any:
    return load_json(read_bytes(path, kind), str(path), max_depth=max_depth)


def walk_files(root: Path, name: str | None = None, *, suffixes: tuple[str, ...] = (),
               max_entries: int = WALK_MAX_ENTRIES, max_depth: int = WALK_MAX_DEPTH) -> Iterator[Path]:
    """Entries under ``root`` named ``name`` (or ending in one of ``suffixes``) that are not folders, sorted
    per folder; reading them goes through :func:`read_bytes`, which refuses what is not a regular file.

    Symbolic links to folders are not followed (a link to ``/`` would walk the machine); a walk that would look at
    more than ``max_entries`` entries or go deeper than ``max_depth`` folders is refused with
    ReadRefused, not truncated silently, so that a caller never acts on a part taken for the whole.
    """
    seen = 0
    stack: list[tuple[Path, int]] = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            raise ReadRefused(folder, f"cannot list ({exc.strerror or exc})") from None
        seen += len(entries)
        if seen > max_entries:
            raise ReadRefused(root, f"more than {max_entries} entries below it; give a smaller folder")
        subfolders = []
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                subfolders.append(Path(entry.path))
            elif (name is not None and entry.name == name) or (suffixes and entry.name.endswith(suffixes)):
                yield Path(entry.path)  # whatever it is (a link, a FIFO): the reader refuses it, with its reason
        if subfolders and depth + 1 > max_depth:
            raise ReadRefused(root, f"folders nested deeper than {max_depth} levels below it; give a smaller folder")
        stack.extend((sub, depth + 1) for sub in reversed(subfolders))
