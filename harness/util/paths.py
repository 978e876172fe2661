"""Where the project's own data lives: the fixtures folder and the default reports root."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["FIXTURES", "REPO_ROOT", "reports_root", "resolve_fixture"]

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = REPO_ROOT / "fixtures"


def reports_root() -> Path:
    """The default output root: ``$SGLANG_REPRO_REPORTS`` or ``reports/`` of the checkout."""
    return Path(os.environ.get("SGLANG_REPRO_REPORTS", REPO_ROOT / "reports"))


def resolve_fixture(name: str, *, relative_to: Path | None = None) -> Path | None:
    """A fixture named in a scenario: relative to the fixtures folder, else to the scenario file."""
    for base in (FIXTURES, relative_to):
        if base is not None and (base / name).is_file():
            return (base / name).resolve()
    return None
