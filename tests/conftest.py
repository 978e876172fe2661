from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def run_cli():
    """Run ``python -m harness ARGS`` as a real subprocess; returns CompletedProcess."""

    def run(*args: str, timeout: float = 120, env: dict[str, str] | None = None, cwd: Path | None = None):
        return subprocess.run(
            [sys.executable, "-m", "harness", *map(str, args)],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd or REPO,
            env={**os.environ, **(env or {})},
        )

    return run
