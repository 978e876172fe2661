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


def default_cache_dir() -> Path:
    """``$SGLANG_REPRO_CACHE``, else ``~/.cache/sglang-repro``: builds' environments and the release wheels."""
    root = os.environ.get("SGLANG_REPRO_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "sglang-repro"


def resolve_fixture(name: str, *, relative_to: Path | None = None) -> Path | None:
    """A fixture named in a scenario: relative to the fixtures folder, else to the scenario file."""
    for base in (FIXTURES, relative_to):
        if base is not None and (base / name).is_file():
            return (base / name).resolve()
    return None
