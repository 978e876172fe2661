from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.sim import SCHEDULER_ENV

REPO = Path(__file__).resolve().parent.parent
# The benchmarks the tests run at toy sizes keep no record: benchmarks/results/ holds only real runs, the ones
# the README quotes (benchmarks/_results.py).
os.environ["SGLANG_REPRO_BENCH_RESULTS"] = "-"


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


@pytest.fixture(scope="module", autouse=True)
def _standin_for_marked_modules(request: pytest.FixtureRequest):
    """``pytestmark = pytest.mark.standin``: every reference server the module starts, through any command, runs
    the torch-free stand-in (about 0.8 CPU-s a start against the model's 3.7: no ``import torch`` in the scheduler
    child). For modules whose claim is about the harness; tests/sim/test_standin_contract.py holds the stand-in to
    the reference server's HTTP and log contract. Module-scoped and autouse, so it is in place before the module's
    own server fixtures start."""
    if request.node.get_closest_marker("standin") is None:
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SCHEDULER_ENV, "standin")
        yield
