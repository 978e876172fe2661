"""The history benchmarks run end to end on small inputs (their full figures are in the README)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _bench(name: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / name), *args], capture_output=True, text=True,
                          timeout=600, cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.slow
def test_detection_benchmark_prints_every_detector_beside_ours() -> None:
    out = _bench("bench_detection.py", "--seeds", "2")
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    assert [r.split("|")[1].strip() for r in rows[1:]] == [
        "sglang-repro", "SGLang 10% vs mean of 10", "HUD vLLM 3 vs 3 medians x0.8/x1.2", "Otava E-Divisive w50 p0.001"]
    assert "crash appears: alert at the first crash in 2 of 2" in out


@pytest.mark.slow
def test_dashboard_benchmark_measures_a_small_year() -> None:
    out = _bench("bench_dashboard.py", "--nights", "12", "--cases", "3")
    assert "360 points (12 nights x 3 cases x 10 metrics)" in out and "peak RSS" in out
