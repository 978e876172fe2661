"""Where the project's own data lives: the fixtures folder, the default reports root and the build cache."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["FIXTURES", "REPO_ROOT", "default_cache_dir", "reports_root", "resolve_fixture"]

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = REPO_ROOT / "fixtures"


def reports_root() -> Path:
    """The default output root: ``$SGLANG_REPRO_REPORTS`` or ``reports/`` of the checkout."""
    return Path(os.environ.get("SGLANG_REPRO_REPORTS", REPO_ROOT / "reports"))


def _inside(path: Path, root: Path) -> bool:
    return os.path.commonpath([path, root]) == str(root)


def default_cache_dir() -> Path:
    """``$SGLANG_REPRO_CACHE``, else ``~/.cache/sglang-repro``: builds' environments and the release wheels."""
    root = os.environ.get("SGLANG_REPRO_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "sglang-repro"


def resolve_fixture(name: str, *, relative_to: Path | None = None) -> Path | None:
    """A fixture named in a scenario: relative to the fixtures folder, else to the scenario file; None if
    there is none there.

    Confined (docs/safety.md): the file, links resolved, lies inside ``fixtures/`` or the scenario's folder;
    ``/etc/passwd``, ``../../../etc/passwd``, ``/proc/self/environ`` or a link out of those folders name no
    fixture. Its size is bounded where it is read (``CAPS["fixture"]`` in harness.util.bounded_read)."""
    roots = [Path(os.path.realpath(base)) for base in (FIXTURES, relative_to) if base is not None]
    for base in (FIXTURES, relative_to):
        if base is None:
            continue
        found = Path(os.path.realpath(base / name))
        if any(_inside(found, root) for root in roots) and found.is_file():
            return found
    return None
