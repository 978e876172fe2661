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


def _bisect_from_another_folder(tmp_path: Path, *flags: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The issue's command, run from a sibling of the demo checkout: a relative scenario path, --repo, --out and
    --store, each of which names the right place only from that folder."""
    make_demo_repo(tmp_path / "demo", step_cost_ms=20.0, scheduler="standin")  # a claim about paths: the stand-in
    here = tmp_path / "elsewhere"
    here.mkdir()
    env = {**os.environ, "SGLANG_REPRO_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "harness", "bisect",
                           os.path.relpath(REPO / "fixtures" / "bisect" / "stale_out_cache_loc_tiny.yaml", here),
                           "--repo", "../demo",
                           "--good", "v0.3.0", "--bad", "v0.4.0", "--trials", "1", "--confirm-trials", "1",
                           "--out", "o", "--store", "s.db", *flags],
                          cwd=here, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 0 and "FOUND" in done.stdout, done.stdout + done.stderr
    return done, here


def _stored(here: Path) -> int:
    conn = sqlite3.connect(here / "s.db")
    try:
        [(rows,)] = list(conn.execute("SELECT COUNT(*) FROM runs"))
    finally:
        conn.close()
    return int(rows)


def test_bisect_with_relative_out_and_store_from_another_folder_keeps_every_step(tmp_path: Path) -> None:
    _, here = _bisect_from_another_folder(tmp_path)
    records = list((here / "o").rglob("result.json"))
    assert _stored(here) == len(records) > 2  # every step's trial reached the store the command names
    assert sorted(p.name for p in here.iterdir()) == ["o", "s.db"]


def test_bisect_jobs_100000_with_relative_paths_from_another_folder(tmp_path: Path) -> None:
    # The issue saw exit 3 on a `.job` path: each probe process runs in the package's folder, where a relative
    # o/bisect/<id>/probes/<name>.job names nothing. K far above the range: every commit in one round.
    done, here = _bisect_from_another_folder(tmp_path, "--jobs", "100000")
    [folder] = list((here / "o" / "bisect").iterdir())
    assert list((folder / "probes").glob("*.job")), "no probe job was written under the relative --out"
    records = list((here / "o").rglob("result.json"))
    assert _stored(here) == len(records) > 2, done.stdout
    assert sorted(p.name for p in here.iterdir()) == ["o", "s.db"]
