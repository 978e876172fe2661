"""``bisect --executor slurm --jobs K`` on the real one-node cluster, trials recorded in a real PostgreSQL.

A generated 16-commit range of the reference server's history (harness.bisect.demo_repo): the K-ary
search (4 commits a round, one SLURM job each) must name the same culprit as the local ``git bisect run``
(binary: one step a round), in fewer rounds; every probe job ran with a GPU SLURM gave it, and every trial
is a run record in PostgreSQL. The local search runs second and reuses the fleet's trials from the store
(the same experiment), as bisections do: its steps still count one a round. (``--executor slurm --jobs 1``
is the same code with K = 1; the pure search's tests cover K = 1 against git.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.bisect.demo_repo import Layout, make_demo_repo
from harness.bisect.kary import expected_rounds
from harness.store.store import open_store

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "fixtures" / "bisect" / "stale_out_cache_loc_tiny.yaml"
LAYOUT = Layout(commits=24, culprit=10, fix=17, unrelated_add=4, unrelated_remove=12, broken=(7, 14), slowdown=20)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm")]


def _bisect(repo: Path, named: dict[str, str], out: Path, env: dict[str, str], *extra: str
            ) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    res = subprocess.run([sys.executable, "-m", "harness", "bisect", str(SCENARIO), "--repo", str(repo),
                          "--good", named["c0"], "--bad", named[f"c{LAYOUT.fix - 1}"], "--trials", "1",
                          "--confirm-trials", "1", "--out", str(out), *extra],
                         capture_output=True, text=True, timeout=900, cwd=REPO, env=env)
    (report,) = out.glob("bisect/*/report.json")
    return res, json.loads(report.read_text())


def test_a_k_ary_bisect_on_slurm_finds_the_same_culprit_in_fewer_rounds(slurm_conf: str, pg_url: str,
                                                                         tmp_path: Path) -> None:
    named = make_demo_repo(tmp_path / "demo", LAYOUT, step_cost_ms=20.0, scheduler="standin")  # search logic: the stand-in
    env = {**os.environ, "SGLANG_REPRO_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    reports = {}
    for name, extra in (("k4", ("--executor", "slurm", "--jobs", "4")), ("local", ())):
        res, report = _bisect(tmp_path / "demo", named, tmp_path / name, env, "--store", pg_url, "--slurm-poll",
                              "1", *extra)
        assert res.returncode == 0, res.stdout + res.stderr
        reports[name] = report
        if name != "local":
            assert "job(s) submitted" in res.stderr
    culprits = {name: r["commits"]["culprit"]["commit"] for name, r in reports.items()}
    assert culprits == {"k4": named["culprit"], "local": named["culprit"]}
    assert all(r["commits"]["confirmed"] for r in reports.values())
    k4, k1 = reports["k4"]["commits"], reports["local"]["commits"]
    count = k4["commits_in_range"]
    assert count == LAYOUT.fix - 1
    assert k4["jobs"] == 4 and k1["jobs"] == 1
    assert k4["rounds"] < k1["rounds"], (k4["rounds"], k1["rounds"])
    assert k4["rounds"] <= expected_rounds(count, 4) + 2  # a skip (a commit that does not install) may add one
    rounds = [s.get("round") for s in k4["steps"] if s["kind"] == "step"]
    assert max(rounds) == k4["rounds"] and max(rounds.count(r) for r in set(rounds)) > 1  # several at once
    with open_store(pg_url) as store:
        records = store.records()
    # The SLURM search's trials ran inside jobs, each with the GPU SLURM gave it (CUDA_VISIBLE_DEVICES).
    searched = {t["artifacts"] for s in k4["steps"] for t in s["trials"] if t["artifacts"]}
    in_jobs = [r for r in records if r.artifacts in searched]
    assert in_jobs and all(r.host.cuda_visible_devices for r in in_jobs)
    assert all(Path(r.artifacts).resolve().is_relative_to(tmp_path.resolve()) for r in in_jobs)
    # The user's checkout never moved: no bisect state in it.
    head = subprocess.run(["git", "-C", str(tmp_path / "demo"), "symbolic-ref", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert head == "refs/heads/main"
    assert not list((tmp_path / "demo" / ".git").glob("BISECT_*"))
