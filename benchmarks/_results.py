"""Benchmark results as data: every run of a benchmark leaves a JSON record under ``benchmarks/results/``.

A record is ``benchmarks/results/<benchmark>/<UTC stamp>-<commit>.json``: the benchmark's own summary (its
figures, units in their names, ratios against the peer it ran beside) plus what it ran on: the commit (and
whether the tree had uncommitted changes), the machine (CPU model, cores, memory), the load average before and
after, the Python, the command line. ``render_figures.py`` quotes figures in the README and
``benchmarks/README.md`` from the newest record of each benchmark, and ``tests/test_figures.py`` fails when a
quoted figure has no record behind it or says another value than its record.

``$SGLANG_REPRO_BENCH_RESULTS`` moves the folder (the tests' smoke runs write into their own temporary one);
``-`` writes no record.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS_ENV = "SGLANG_REPRO_BENCH_RESULTS"
DEFAULT_RESULTS = REPO / "benchmarks" / "results"

__all__ = ["DEFAULT_RESULTS", "RESULTS_ENV", "newest_record", "record", "results_dir"]


def results_dir() -> Path | None:
    where = os.environ.get(RESULTS_ENV)
    if where == "-":
        return None
    return Path(where) if where else DEFAULT_RESULTS


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    return round(pages * size / 2**30, 1)


def machine() -> dict[str, Any]:
    return {"cpu": _cpu_model(), "cores": os.cpu_count(), "memory_gib": _memory_gib(), "system": platform.system(),
            "python": platform.python_version()}


def record(benchmark: str, result: dict[str, Any], *, load_before: tuple[float, ...]) -> Path | None:
    """Write the record of one run of ``benchmark``; its path, or None where records are turned off."""
    folder = results_dir()
    if folder is None:
        return None
    commit = _git("rev-parse", "--short=12", "HEAD") or "unknown"
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    body = {
        "benchmark": benchmark,
        "recorded_at": stamp,
        "commit": commit,
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "machine": machine(),
        "load_before": list(load_before),
        "load_after": list(os.getloadavg()),
        "argv": sys.argv[1:],
        "result": result,
    }
    path = folder / benchmark / f"{stamp}-{commit}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)  # never a half-written record: the renderer may read the folder at any time
    return path


def newest_record(benchmark: str, folder: Path | None = None) -> dict[str, Any] | None:
    """The newest record of ``benchmark`` (by its stamp), or None when it has none."""
    base = folder or results_dir() or DEFAULT_RESULTS
    records = sorted((base / benchmark).glob("*.json")) if (base / benchmark).is_dir() else []
    if not records:
        return None
    data: dict[str, Any] = json.loads(records[-1].read_text(encoding="utf-8"))
    data["path"] = str(records[-1])
    return data
