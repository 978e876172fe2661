"""Issue 37, relative paths in bisect: from another folder, a relative --out and --store name the same places
for every `git bisect run` step and probe as for the command (they run in a worktree, not in its folder)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from harness.bisect.demo_repo import make_demo_repo
from tests.hostile._probe import REPO

pytestmark = pytest.mark.slow


def test_bisect_with_relative_out_and_store_from_another_folder_keeps_every_step(tmp_path: Path) -> None:
    make_demo_repo(tmp_path / "demo", step_cost_ms=20.0)
    here = tmp_path / "elsewhere"
    here.mkdir()
    env = {**os.environ, "SGLANG_REPRO_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "harness", "bisect",
                           str(REPO / "fixtures" / "bisect" / "stale_out_cache_loc_tiny.yaml"), "--repo", "../demo",
                           "--good", "v0.3.0", "--bad", "v0.4.0", "--trials", "1", "--confirm-trials", "1",
                           "--out", "o", "--store", "s.db"],
                          cwd=here, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0 and "FOUND" in done.stdout, done.stdout + done.stderr
    records = list((here / "o").rglob("result.json"))
    conn = sqlite3.connect(here / "s.db")
    try:
        [(rows,)] = list(conn.execute("SELECT COUNT(*) FROM runs"))
    finally:
        conn.close()
    assert rows == len(records) > 2  # every step's trial reached the store the command names
    assert sorted(p.name for p in here.iterdir()) == ["o", "s.db"]
