"""The history benchmarks run end to end on small inputs (their full figures are in the README)."""

from __future__ import annotations

import json
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
def test_nightly_alerts_benchmark_prints_every_detector_on_both_seed_sets() -> None:
    out = json.loads(_bench("bench_nightly_alerts.py", "--per-cell", "1", "--quiet", "1"))
    assert [s["seed_set"] for s in out["seed_sets"]] == [out["tune_seed_set"], out["report_seed_set"]]
    for seed_set in out["seed_sets"]:
        assert {"sglang-repro", "SGLang: 10% vs mean of last 10", "HUD vLLM: median 3 vs 3, x0.8/x1.2",
                "Otava (re-implemented): E-Divisive w50, p<0.001"} <= set(seed_set)
        assert len(seed_set["sglang-repro"]["recall_by_cell_effect_noise"]) == 25


@pytest.mark.slow
def test_dashboard_benchmark_measures_a_small_year() -> None:
    out = json.loads(_bench("bench_dashboard.py", "--nights", "12", "--cases", "3"))
    assert (out["points"], out["nights"], out["cases"], out["metrics"]) == (360, 12, 3, 10)
    assert out["dashboard_s"] > 0 and out["dashboard_peak_rss_mib"] > 0 and out["site_mib"] > 0
    this = out["rounds"]["this"]
    for part in ("dashboard_next_night", "export_hud", "export_parquet"):
        assert this[part]["s"] > 0 and this[part]["peak_rss_mib"] > 0, part
    assert this["export_hud"]["file_mib"] > 0 and this["export_parquet"]["file_mib"] > 0  # 12 x 3: ~0.4 and 0.02


@pytest.mark.slow
def test_dashboard_benchmark_scales_the_filled_store_by_copies(tmp_path: Path) -> None:
    store = tmp_path / "year.db"
    out = json.loads(_bench("bench_dashboard.py", "--nights", "6", "--cases", "2", "--scale", "3",
                            "--parts", "dashboard", "--store", str(store)))
    assert (out["points"], out["cases"]) == (360, 6)
    import sqlite3

    conn = sqlite3.connect(store)
    try:  # the copies are the runs under other case names, each with its metrics
        cases = [r[0] for r in conn.execute("SELECT DISTINCT case_name FROM runs ORDER BY case_name")]
        per_run = {r[0] for r in conn.execute("SELECT count(*) FROM metrics GROUP BY run_id")}
    finally:
        conn.close()
    assert cases == ["case-000", "case-000-x1", "case-000-x2", "case-001", "case-001-x1", "case-001-x2"]
    assert per_run == {10}
