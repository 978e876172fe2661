"""Dashboard and exports for one year of nightly data x 200 cases x 10 metrics (730k points).

The store is filled first (not timed; ``--store PATH`` keeps it, and a later run with the same
path and sizes reuses it), then each measured command runs in a child process whose wall time and
peak RSS are measured: ``sglang-repro dashboard`` cold (no detection cached), again after one more
night is recorded (what a nightly's review costs: only the new night is recomputed), and
``store export`` as HUD records and as Parquet. With ``--baseline CHECKOUT`` the same commands run
from that checkout too, in the same run, each on its own copy of the store (a version the
checkout does not know is not opened by it). ``--baseline-rev REV`` (repeatable) does the same for a
revision of this repository, unpacked with ``git archive`` into the run's temporary folder, so that a
fresh clone measures the previous implementations beside this one without preparing a checkout.

    .venv/bin/python benchmarks/bench_dashboard.py [--nights 365 --cases 200] [--baseline /tmp/before]
        [--baseline-rev be4b0bf --baseline-rev 0b9cf12^1] [--scale 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _common import REPO, emit  # also puts the repository root on sys.path, for harness and tests

from harness.store.migrations import migrate
from harness.store.store import new_batch, open_store
from tests.helpers import make_record

METRICS = ("accept_length", "accept_length_server", "output_throughput_tok_s", "request_throughput_rps",
           "ttft_ms_p50", "itl_ms_p50", "e2e_ms_p50", "tpot_ms", "queue_ms", "prefill_tok_s")
# The store version the fill writes: the first whose runs carry what the writer now writes (their kind, 7; their
# --set overrides, 9: tonight's runs are written by this checkout's writer into each arm's copy); the detection
# cache (5) is there but empty, so the first dashboard is cold. A checkout older than migration 9 does not open it
# (--baseline-rev of such a revision is refused by its own store).
FILL_VERSION = 9
# Peak RSS of a child, read by the child's own parent: a tiny wrapper that runs the command and reports
# getrusage(RUSAGE_CHILDREN) of itself, so one child's figure is never another's maximum.
_MEASURE = ("import resource, subprocess, sys, time\n"
            "t = time.perf_counter()\n"
            "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode\n"
            "wall = time.perf_counter() - t\n"
            "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "print(rc, wall, u.ru_maxrss / 1024, u.ru_utime + u.ru_stime)\n")


def _night(store_path: str, night: int, cases: int, rng: np.random.Generator, *, last: bool = False) -> None:
    day = f"2025-{1 + night // 31 % 12:02d}-{1 + night % 28:02d}T{night % 24:02d}:00:00+00:00"
    when = f"{2025 + night // 372}-{day[5:]}"
    if last:  # tonight: after every night filled (their made-up dates wrap), so it extends each series
        when = f"{2026 + night // 372}-12-31T23:00:00+00:00"
    batch = new_batch("nightly", f"night-{night:03d}", started_at=when)
    recs = [make_record(run_id=f"n{night}-c{c}", case=f"case-{c:03d}", scenario=f"scenario-{c // 10:02d}",
                        started_at=batch.started_at,
                        metrics={m: float(100 * (1 + 0.03 * rng.standard_normal())) for m in METRICS})
            for c in range(cases)]
    # Not migrated past what it was filled at: the baseline checkout must still be able to open its copy.
    with open_store(store_path, migrate_to_latest=False) as store:
        store.record_many(recs, batch)


def _fill(path: Path, nights: int, cases: int, scale: int = 1) -> float:
    """Fill ``path`` with ``nights`` x ``cases`` runs (``scale`` copies of them) unless a previous run left
    exactly that; fill seconds."""
    stamp = path.with_suffix(".filled")
    want = f"{nights}x{cases}" + (f"x{scale}" if scale > 1 else "") + f" v{FILL_VERSION}"
    if path.exists() and stamp.exists() and stamp.read_text() == want:
        return 0.0
    path.unlink(missing_ok=True)
    rng = np.random.default_rng(0)
    t = time.perf_counter()
    with open_store(str(path), migrate_to_latest=False) as store:
        migrate(store.engine, target=FILL_VERSION, where=store.where)
    for night in range(nights):
        _night(str(path), night, cases, rng)
    _copies(path, scale)
    stamp.write_text(want)
    return time.perf_counter() - t


def _copies(path: Path, scale: int) -> None:
    """``scale - 1`` more copies of every run and its metrics under other case names (``case-007-x1``), by
    SQL in seconds: a store of 1.5M points without a fill of an hour. Tonight's runs (``_night(last=True)``)
    extend the first copy's series only."""
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        cols = [r[1] for r in conn.execute("PRAGMA table_info(runs)")]
        for k in range(1, scale):
            renamed = {"run_id": f"run_id || '-x{k}'", "case_name": f"case_name || '-x{k}'"}
            conn.execute(f"INSERT INTO runs ({', '.join(cols)}) SELECT "
                         f"{', '.join(renamed.get(c, c) for c in cols)} FROM runs WHERE run_id NOT LIKE '%-x%'")
            conn.execute(f"INSERT INTO metrics (run_id, name, value) SELECT run_id || '-x{k}', name, value "
                         "FROM metrics WHERE run_id NOT LIKE '%-x%'")
        conn.commit()
    finally:
        conn.close()


def _measure(checkout: Path, argv: list[str]) -> dict[str, Any]:
    """Wall seconds and peak RSS (MiB) of ``python -m harness ARGV`` run from ``checkout``."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run([sys.executable, "-c", _MEASURE, sys.executable, "-m", "harness", *argv],
                          cwd=checkout, env=env, capture_output=True, text=True, timeout=3600)
    rc, wall, peak, cpu = done.stdout.split()
    if int(rc) != 0:
        raise SystemExit(f"{checkout}: harness {' '.join(argv)} exited {rc}: {done.stderr.strip()[-400:]}")
    # CPU seconds beside the wall time: on a shared machine the wall time is mostly the neighbours'.
    return {"s": round(float(wall), 2), "cpu_s": round(float(cpu), 2), "peak_rss_mib": round(float(peak)),
            "load_1m": round(os.getloadavg()[0], 2)}


def _round(checkout: Path, db: Path, site: Path, nights: int, cases: int, parts: set[str],
           formats: Sequence[str] = ("hud", "parquet")) -> dict[str, Any]:
    """The commands from one checkout, on its own copy of the store."""
    out: dict[str, Any] = {"checkout": str(checkout)}
    if "dashboard" in parts:
        out["dashboard_cold"] = _measure(checkout, ["dashboard", "--store", str(db), "-o", str(site)])
        out["site_mib"] = round(sum(f.stat().st_size for f in site.iterdir()) / 2**20, 1)
        _night(str(db), nights, cases, np.random.default_rng(nights), last=True)  # tonight's runs arrive
        out["dashboard_next_night"] = _measure(checkout, ["dashboard", "--store", str(db), "-o", str(site)])
    if "exports" not in parts:
        return out
    for fmt in formats:
        path = db.parent / f"export.{fmt}"
        out[f"export_{fmt}"] = _measure(checkout, ["store", "export", "--store", str(db), "--format", fmt, "-o", str(path)])
        out[f"export_{fmt}"]["file_mib"] = round(path.stat().st_size / 2**20, 2)
    return out


def _unpack(rev: str, into: Path) -> Path:
    """``git archive REV`` of this repository unpacked into ``into``: a checkout of that revision's files."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], capture_output=True, timeout=300)
    if archive.returncode != 0:
        raise SystemExit(f"--baseline-rev {rev}: git archive failed: {archive.stderr.decode(errors='replace').strip()}")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True, timeout=300)
    return into


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nights", type=int, default=365)
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--scale", type=int, default=1,
                    help="copies of the filled runs under other case names (--scale 2: 1.46M points)")
    ap.add_argument("--store", type=Path, default=None, help="keep the filled store here and reuse it")
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout to measure in the same run")
    ap.add_argument("--baseline-rev", action="append", default=[],
                    help="a revision of this repository to measure in the same run (repeatable)")
    ap.add_argument("--parts", default="dashboard,exports", help="what to measure: dashboard, exports or both")
    ap.add_argument("--exports", default="hud,parquet", help="the export formats measured (hud, parquet or both)")
    ap.add_argument("--work", type=Path, default=None, help="unused; accepted like the other benchmarks")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    formats = [f for f in args.exports.split(",") if f]
    if not set(formats) <= {"hud", "parquet"}:
        raise SystemExit(f"--exports {args.exports}: name hud, parquet or both")
    if not parts or not parts <= {"dashboard", "exports"}:
        raise SystemExit(f"--parts {args.parts}: name dashboard, exports or both")
    with tempfile.TemporaryDirectory() as tmp:
        master = args.store or Path(tmp) / "year.db"
        master.parent.mkdir(parents=True, exist_ok=True)
        fill = _fill(master, args.nights, args.cases, args.scale)
        rounds = {}
        arms: list[tuple[str, Path | None]] = [("this", REPO), ("baseline", args.baseline)]
        for i, rev in enumerate(args.baseline_rev):
            arms.append((f"rev {rev}", _unpack(rev, Path(tmp) / f"rev-{i}")))
        for label, checkout in arms:
            if checkout is None:
                continue
            work = Path(tmp) / label.replace(" ", "-").replace("/", "-")
            work.mkdir()
            db = work / "year.db"
            shutil.copyfile(master, db)  # each checkout on a store as filled (this one caches detection in it)
            rounds[label] = _round(checkout.resolve(), db, work / "site", args.nights, args.cases, parts, formats)
    result: dict[str, Any] = {
        "question": "dashboard and exports for a store of nightly history",
        "points": args.nights * args.cases * args.scale * len(METRICS), "nights": args.nights,
        "cases": args.cases * args.scale,
        "metrics": len(METRICS), "store_fill_s": round(fill, 1),
        "rounds": rounds, "load_1m": round(os.getloadavg()[0], 2)}
    if "dashboard" in parts:  # the figures of this checkout at the top level, as before
        result.update(dashboard_s=rounds["this"]["dashboard_cold"]["s"],
                      dashboard_peak_rss_mib=rounds["this"]["dashboard_cold"]["peak_rss_mib"],
                      site_mib=rounds["this"]["site_mib"])
    for label in rounds:
        if label == "this":
            continue
        base = rounds[label]
        result["ratio_this_over_baseline" if label == "baseline" else f"ratio_this_over {label}"] = {
            k: {"time": round(rounds["this"][k]["s"] / base[k]["s"], 3),
                "cpu": round(rounds["this"][k]["cpu_s"] / max(0.01, base[k]["cpu_s"]), 3),
                "peak_rss": round(rounds["this"][k]["peak_rss_mib"] / base[k]["peak_rss_mib"], 3)}
            for k in ("dashboard_cold", "dashboard_next_night", "export_hud", "export_parquet")
            if k in rounds["this"] and base[k]["s"]}
    emit(result, args.out)


if __name__ == "__main__":
    main()
