"""Where the harness reads and writes: the user's project (its reports folder, its fixture folders), the package's
built-in data, and the user's cache directory. Never beside the installed package (:mod:`harness.util.project_config`).
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.util.project_config import project

__all__ = ["builtin_fixtures", "default_cache_dir", "fixture_roots", "reports_root", "resolve_fixture"]


def reports_root() -> Path:
    """The default output root: ``$SGLANG_REPRO_REPORTS``, the project's ``reports``, else ``reports/`` of the
    project's folder (the folder of its configuration, or the working directory)."""
    return project().reports


def _inside(path: Path, root: Path) -> bool:
    return os.path.commonpath([path, root]) == str(root)


def default_cache_dir() -> Path:
    """``$SGLANG_REPRO_CACHE``, else ``$XDG_CACHE_HOME/sglang-repro``, else ``~/.cache/sglang-repro``: builds'
    environments and the release wheels."""
    root = os.environ.get("SGLANG_REPRO_CACHE")
    if root:
        return Path(root).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache") / "sglang-repro"


def builtin_fixtures() -> Path:
    """The fixtures shipped with the package (``prompts/word_problems.txt``), read-only."""
    from harness.data import data_path

    return data_path("fixtures")


def fixture_roots() -> tuple[Path, ...]:
    """The folders a fixture name is looked up in, in order: the project's ``fixtures``, then the built-in ones."""
    return (*project().fixtures, builtin_fixtures())


def resolve_fixture(name: str, *, relative_to: Path | None = None) -> Path | None:
    """A fixture named in a scenario: relative to the project's fixture folders, the scenario file's folder, then
    the built-in fixtures; None if there is none there.

    Confined (docs/safety.md): the file, links resolved, lies inside one of those folders; ``/etc/passwd``,
    ``../../../etc/passwd``, ``/proc/self/environ`` or a link out of those folders name no fixture. Its size is
    bounded where it is read (``CAPS["fixture"]`` in harness.util.bounded_read)."""
    *own, builtin = fixture_roots()
    bases = [*own, *([relative_to] if relative_to is not None else []), builtin]
    roots = [Path(os.path.realpath(base)) for base in bases]
    for base in bases:
        found = Path(os.path.realpath(base / name))
        if any(_inside(found, root) for root in roots) and found.is_file():
            return found
    return None
