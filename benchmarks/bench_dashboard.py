"""Dashboard build time and peak memory for one year of nightly data x 200 cases x 10 metrics (730k points).

The store is filled first (not timed), then ``sglang-repro dashboard`` runs in a child process whose
wall time and peak RSS are measured.

    .venv/bin/python benchmarks/bench_dashboard.py [--nights 365 --cases 200]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import emit  # also puts the repository root on sys.path, for harness and tests

from harness.store.store import new_batch, open_store
from tests.store.records import make_record

METRICS = ("accept_length", "accept_length_server", "output_throughput_tok_s", "request_throughput_rps",
           "ttft_ms_p50", "itl_ms_p50", "e2e_ms_p50", "tpot_ms", "queue_ms", "prefill_tok_s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nights", type=int, default=365)
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--work", type=Path, default=None, help="unused; accepted like the other benchmarks")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "year.db")
        t = time.perf_counter()
        with open_store(db) as store:
            for night in range(args.nights):
                day = f"2025-{1 + night // 31 % 12:02d}-{1 + night % 28:02d}T{night % 24:02d}:00:00+00:00"
                batch = new_batch("nightly", f"night-{night:03d}", started_at=f"{2025 + night // 372}-{day[5:]}")
                recs = [make_record(f"n{night}-c{c}", case=f"case-{c:03d}", scenario=f"scenario-{c // 10:02d}",
                                    started_at=batch.started_at,
                                    metrics={m: float(100 * (1 + 0.03 * rng.standard_normal())) for m in METRICS})
                        for c in range(args.cases)]
                store.record_many(recs, batch)
        fill = time.perf_counter() - t
        points = args.nights * args.cases * len(METRICS)
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "harness", "dashboard", "--store", db, "-o", str(Path(tmp) / "site")],
                       check=True, capture_output=True)
        wall = time.perf_counter() - t
        peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        size = sum(f.stat().st_size for f in (Path(tmp) / "site").iterdir()) / 2**20
    emit({"question": "dashboard build time and memory for a store of nightly history",
          "points": points, "nights": args.nights, "cases": args.cases, "metrics": len(METRICS),
          "store_fill_s": round(fill, 1), "dashboard_s": round(wall, 2), "dashboard_peak_rss_mib": round(peak_mib),
          "site_mib": round(size, 1), "load_1m": round(os.getloadavg()[0], 2)}, args.out)


if __name__ == "__main__":
    main()
