"""Which sglang releases a traceback's frames come from: each frame's file:line, function and code line read in
the real wheels (:mod:`harness.contract.wheels`).

A frame ``File ".../sglang/srt/x.py", line N, in f`` with the code line printed under it fits a release when that
release's ``srt/x.py`` has line N inside a ``def f`` and, where the code line was printed, the same text there.
Releases move lines all the time, so a few frames usually leave one release or two: sglang#28264's seven frames fit
0.5.13 and 0.5.13.post1 only.

Per release, what a file's lines are (the innermost function of each line and a digest of its text) is computed
from the wheel on first use and kept under the cache dir (``<cache>/triage-frames/<version>.json``), never in the
repository; the list of releases on the index is kept there for a day.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.signatures.frame_evidence import FILE_LINE
from harness.util.atomic import write_atomic
from harness.util.bounded_read import ReadRefused, read_json

__all__ = ["Frame", "ReleaseFit", "fit_releases", "sglang_frames"]

_SGLANG_PATH = re.compile(r"(?:^|[/\\])sglang[/\\]((?:srt|lang|jit_kernel|multimodal_gen|cli)[/\\].+\.py)$")
_LINE_NO = re.compile(r', line (\d+), in ')
_RELEASE_LIST_TTL_S = 24 * 3600.0
_FIRST_RELEASE = "0.5.12"  # the release line this project reads (harness.contract.wheels)


@dataclass(frozen=True)
class Frame:
    """One sglang frame of a traceback: its file under ``sglang/``, line, function and the code printed under it."""

    path: str
    line: int
    function: str
    code: str | None

    def label(self) -> str:
        return f"{self.path.rsplit('/', 1)[-1]}:{self.line} {self.function}"


@dataclass(frozen=True)
class ReleaseFit:
    """The releases every frame fits, and where none does, how many frames each release fits."""

    frames: tuple[Frame, ...]
    releases: tuple[str, ...]  # checked, oldest first
    fits: tuple[str, ...]  # the releases that all frames fit
    best: tuple[tuple[str, int], ...]  # (release, frames fitted) for the releases fitting the most, when none fits all
    error: str | None = None  # why no release could be checked (no network, no cache)


def sglang_frames(block: Sequence[str]) -> tuple[Frame, ...]:
    """The frames of a traceback block (prefix-free lines) that are sglang's own files."""
    out = []
    for i, content in enumerate(block):
        m = FILE_LINE.match(content)
        if m is None:
            continue
        path = _SGLANG_PATH.search(m.group("path").replace("\\", "/"))
        line = _LINE_NO.search(content)
        if path is None or line is None:
            continue
        code = None
        if i + 1 < len(block):
            nxt = block[i + 1]
            if nxt[:1] in (" ", "\t") and FILE_LINE.match(nxt) is None and nxt.strip().strip("^~ ") != "":
                code = nxt.strip()
        out.append(Frame(path.group(1).replace("\\", "/"), int(line.group(1)), m.group("function"), code))
    return tuple(out)


def fit_releases(frames: Sequence[Frame], cache_dir: Path | None = None,
                 releases: Sequence[str] | None = None) -> ReleaseFit:
    """Check ``frames`` against every release from 0.5.12 on (or ``releases``), wheels fetched and cached."""
    from harness.util.errors import InfraError

    frames = tuple(frames)
    try:
        versions = tuple(releases) if releases is not None else _release_list(cache_dir)
    except InfraError as exc:
        return ReleaseFit(frames, (), (), (), error=str(exc))
    counts: list[tuple[str, int]] = []
    for version in versions:
        try:
            profile = _Profile(version, cache_dir)
            counts.append((version, sum(1 for f in frames if profile.fits(f))))
        except InfraError as exc:
            return ReleaseFit(frames, versions, (), (), error=str(exc))
    fits = tuple(v for v, n in counts if n == len(frames))
    top = max((n for _, n in counts), default=0)
    best = () if fits or top == 0 else tuple((v, n) for v, n in counts if n == top)
    return ReleaseFit(frames, versions, fits, best)


# -- per-release line data -------------------------------------------------------------------------


def _cache_root(cache_dir: Path | None) -> Path:
    from harness.util.paths import default_cache_dir

    return (cache_dir or default_cache_dir()) / "triage-frames"


def _release_list(cache_dir: Path | None) -> tuple[str, ...]:
    """The releases on the index from 0.5.12 on; asked once a day, else the list kept from the last answer."""
    from harness.contract.wheels import index_versions
    from harness.util.errors import InfraError

    path = _cache_root(cache_dir) / "releases.json"
    kept: list[str] | None = None
    try:
        data = read_json(path, "state")
        kept = [str(v) for v in data["releases"]]
        if time.time() - float(data["at"]) < _RELEASE_LIST_TTL_S:
            return tuple(kept)
    except (OSError, ReadRefused, ValueError, KeyError, TypeError):
        pass
    try:
        found = index_versions(_FIRST_RELEASE)
    except InfraError:
        if kept:
            return tuple(kept)  # offline: the last list the index gave is still a list of real releases
        raise
    _write_json(path, {"at": time.time(), "releases": found})
    return tuple(found)


class _Profile:
    """What each line of a release's files is: its innermost function and a digest of its stripped text."""

    def __init__(self, version: str, cache_dir: Path | None) -> None:
        self.version = version
        self.cache_dir = cache_dir
        self.path = _cache_root(cache_dir) / f"{version}.json"
        try:
            self.files: dict[str, dict[str, object] | None] = read_json(self.path, "state")
        except (OSError, ReadRefused, ValueError):
            self.files = {}

    def fits(self, frame: Frame) -> bool:
        data = self._file(frame.path)
        if data is None:
            return False
        names = data["names"]
        lines = data["lines"]
        assert isinstance(names, list) and isinstance(lines, list)
        if not 1 <= frame.line <= len(lines):
            return False
        name_index, digest = lines[frame.line - 1]
        owner = "<module>" if name_index < 0 else names[name_index]
        if owner != frame.function:
            return False
        return frame.code is None or digest == _digest(frame.code)

    def _file(self, path: str) -> dict[str, object] | None:
        if path not in self.files:
            from harness.contract.wheels import WheelSources

            text = WheelSources.of(self.version, self.cache_dir).text(path)
            self.files[path] = None if text is None else _line_data(text)
            _write_json(self.path, self.files)
        return self.files[path]


def _line_data(text: str) -> dict[str, object]:
    import ast  # only when a release's file is first read; triage of a log without sglang frames never needs it

    lines = text.splitlines()
    owner = [-1] * len(lines)
    names: list[str] = []
    try:
        tree = ast.parse(text)
    except SyntaxError:
        tree = None
    if tree is not None:
        # outer functions first, so an inner def overwrites its own lines: each line gets its innermost function
        defs = sorted((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)),
                      key=lambda n: (n.lineno, -(n.end_lineno or n.lineno)))
        for node in defs:
            names.append(node.name)
            for i in range(node.lineno - 1, min(node.end_lineno or node.lineno, len(lines))):
                owner[i] = len(names) - 1
    return {"names": names, "lines": [[owner[i], _digest(line)] for i, line in enumerate(lines)]}


def _digest(line: str) -> str:
    return hashlib.sha256(line.strip().encode("utf-8")).hexdigest()[:12]


def _write_json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(data))  # two triages writing at once cost a recomputation, not a torn file
