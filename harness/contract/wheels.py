"""Real sglang releases read from their wheels: fetched ``--no-deps`` once, cached, read unzipped, never installed.

The one owner of getting a release's source text: the contract's per-release citations, the build profiles of the
release line and triage's frame data all read through :func:`fetch_wheel` and :class:`WheelSources`.
"""

from __future__ import annotations

import os
import re
import sys
import zipfile
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

from filelock import FileLock
from packaging.version import InvalidVersion, Version

from harness.util.atomic import move_into
from harness.util.bounded_read import ReadRefused, open_regular
from harness.util.errors import EXIT_INFRA, EXIT_OK, InfraError
from harness.util.paths import default_cache_dir
from harness.util.proc import run_bounded

__all__ = ["WheelSources", "cached_wheel", "fetch_wheel", "index_versions", "main", "wheel_dir"]

# A release's wheel is 12 MB and pip needs a few seconds for it; a hung index ends in an error, not a wait.
_DOWNLOAD_TIMEOUT_S = 300.0
_INDEX_TIMEOUT_S = 60.0
# The sources of one file of a release are small; a member larger than this is not source text.
_MAX_MEMBER_BYTES = 8 * 1024 * 1024


def wheel_dir(cache_dir: Path | None = None) -> Path:
    """Where downloaded wheels are kept: ``<cache>/wheels`` (the cache of ``prepare``)."""
    return (cache_dir or default_cache_dir()) / "wheels"


def _canonical(version: str) -> str:
    try:
        return str(Version(version))
    except InvalidVersion as exc:
        raise InfraError(f"sglang version {version!r} is not a PEP 440 version (e.g. 0.5.13.post1)") from exc


def _cached(folder: Path, version: str) -> Path | None:
    for path in sorted(folder.glob("sglang-*.whl")):
        name = path.name.split("-")
        if len(name) > 1 and _canonical_or_none(name[1]) == version and _is_wheel(path):
            return path
    return None


def _is_wheel(path: Path) -> bool:
    """A cached file counts only as a regular file with a zip's end record: a FIFO or a link to /dev/zero under the
    wheel's name hung every reader, and a download cut short was a BadZipFile traceback until deleted by hand; such
    a file is not a hit, so the wheel is fetched again over it (``move_into`` replaces the name, not a link's target)."""
    try:
        with open_regular(path, "wheel") as fh:
            return zipfile.is_zipfile(fh)
    except (ReadRefused, OSError):
        return False


def _canonical_or_none(text: str) -> str | None:
    try:
        return str(Version(text))
    except InvalidVersion:
        return None


def cached_wheel(version: str, cache_dir: Path | None = None) -> Path | None:
    """The cached wheel of sglang ``version``, or None where it has not been downloaded (no network asked)."""
    folder = wheel_dir(cache_dir)
    return _cached(folder, _canonical(version)) if folder.is_dir() else None


def fetch_wheel(version: str, cache_dir: Path | None = None) -> Path:
    """The wheel of sglang ``version``, downloaded ``--no-deps`` on first use and cached; InfraError when it
    cannot be had (no network, no such release), naming the version."""
    version = _canonical(version)
    folder = wheel_dir(cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    hit = _cached(folder, version)
    if hit is not None:
        return hit
    with FileLock(str(folder / f".{version}.lock")):
        hit = _cached(folder, version)
        if hit is not None:
            return hit
        staging = folder / f".download-{version}-{os.getpid()}"
        staging.mkdir(exist_ok=True)
        argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q",
                "--only-binary", ":all:", "-d", str(staging), f"sglang=={version}"]
        try:
            done = run_bounded(argv, timeout=_DOWNLOAD_TIMEOUT_S)  # pip's own children go with it on a timeout
        except InfraError as exc:
            raise InfraError(f"downloading the sglang {version} wheel took over {_DOWNLOAD_TIMEOUT_S:.0f} s") from exc
        wheels = sorted(staging.glob("sglang-*.whl"))
        if done.returncode != 0 or not wheels:
            tail = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
            raise InfraError(f"cannot fetch the sglang {version} wheel: {tail}")
        target = folder / wheels[0].name
        move_into(wheels[0], target)
        for leftover in staging.iterdir():
            leftover.unlink()
        staging.rmdir()
        return target


def index_versions(minimum: str = "0.5.12") -> list[str]:
    """Every sglang release on the package index from ``minimum`` on (post releases included, pre-releases not),
    oldest first."""
    argv = [sys.executable, "-m", "pip", "index", "versions", "sglang", "--disable-pip-version-check"]
    try:
        done = run_bounded(argv, timeout=_INDEX_TIMEOUT_S)
    except InfraError as exc:
        raise InfraError(f"the package index did not list sglang's releases within {_INDEX_TIMEOUT_S:.0f} s") from exc
    match = re.search(r"Available versions:\s*(.+)", done.stdout)
    if done.returncode != 0 or not match:
        raise InfraError("cannot list sglang's releases on the package index: " + (done.stderr.strip()[-200:] or "no answer"))
    floor = Version(minimum)
    found = {Version(v.strip()) for v in match.group(1).split(",") if _canonical_or_none(v.strip())}
    return [str(v) for v in sorted(v for v in found if v >= floor and not v.is_prerelease and not v.is_devrelease)]


class WheelSources:
    """The source files of one release's wheel, read by their path under ``sglang/`` (e.g. ``srt/server_args.py``)."""

    def __init__(self, wheel: Path) -> None:
        self.wheel = wheel
        self.version = _canonical(wheel.name.split("-")[1])
        try:
            self._zip = zipfile.ZipFile(open_regular(wheel, "wheel"))
        except (ReadRefused, OSError, zipfile.BadZipFile) as exc:
            raise InfraError(f"{wheel}: not a readable wheel ({exc}); delete it and it is fetched again") from None
        self._names = {n[len("sglang/"):]: n for n in self._zip.namelist() if n.startswith("sglang/")}
        self._texts: dict[str, str] = {}  # a file is decompressed once however many citations read it

    @classmethod
    def of(cls, version: str, cache_dir: Path | None = None) -> WheelSources:
        return _open(str(fetch_wheel(version, cache_dir)))

    @classmethod
    def from_wheel(cls, wheel: Path) -> WheelSources:
        """The sources of a wheel on disk (one reader per wheel per process)."""
        return _open(str(wheel))

    def files(self, suffix: str = ".py") -> Iterator[str]:
        return (n for n in sorted(self._names) if n.endswith(suffix))

    def has(self, path: str) -> bool:
        return path in self._names

    def text(self, path: str) -> str | None:
        """The file's text, or None where the release has no such file."""
        member = self._names.get(path)
        if member is None:
            return None
        if path not in self._texts:
            if self._zip.getinfo(member).file_size > _MAX_MEMBER_BYTES:
                raise InfraError(f"{self.wheel.name}: {member} is over {_MAX_MEMBER_BYTES} bytes; not a source file")
            self._texts[path] = self._zip.read(member).decode("utf-8", errors="replace")
        return self._texts[path]

    def lines(self, path: str) -> list[str] | None:
        text = self.text(path)
        return None if text is None else text.splitlines()


@lru_cache(maxsize=32)
def _open(wheel: str) -> WheelSources:
    return WheelSources(Path(wheel))


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.contract.wheels VERSION...``: fetch those wheels into the cache (CI does, once)."""
    versions = sys.argv[1:] if argv is None else argv
    try:
        for version in versions:
            print(fetch_wheel(version))
    except InfraError as exc:
        print(f"harness.contract.wheels: {exc}", file=sys.stderr)
        return EXIT_INFRA
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
