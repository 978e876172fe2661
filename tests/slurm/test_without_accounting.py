"""``--executor slurm`` on a real one-node cluster without accounting (issue 37).

``AccountingStorageType=accounting_storage/none`` is a small cluster's default: ``sacct`` answers "Slurm
accounting storage is disabled" and submitit's watcher says UNKNOWN for every job. Before the fix a nightly
ran its jobs to completion in 40 s and then waited 20+ minutes until killed. Here the same nightly (and a
compare, and a ``bisect --jobs 4``) must end with the verdicts the accounting cluster gives, within a bound,
and say that the job states came from scontrol, squeue and the job folders. The cluster (tests/slurm/_cluster.py,
``accounting=False``) runs beside the accounting one; its ``SLURM_CONF`` goes only to these children.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.records.outcome import Outcome
from harness.store.store import open_store
from tests.slurm import _cluster
from tests.slurm.test_executor import NIGHTLY_VERDICTS, REPO, _job_ids, _scenario, _when

# A claim about the harness, not the model: its reference servers are the torch-free stand-in (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.standin]

# The whole command's bound (as the accounting tests'): its nightly takes about 40 s here; the old code waited
# without end once they were done.
BOUND_S = 300.0
# From the last job's end (its record's start + duration) to the command's exit: a few polls (1 s) and the
# nightly's own report. The old code never got there.
TAIL_S = 60.0
FALLBACK = "by scontrol, squeue and its folder: sacct has no record of it"


def _env(conf: str, **extra: str) -> dict[str, str]:
    return {**os.environ, _cluster.CONF_ENV: conf, "PATH": os.environ.get("PATH", "") + ":/usr/sbin", **extra}


def _cli(conf: str, *args: object, bound_s: float = BOUND_S, **env: str
         ) -> tuple[subprocess.CompletedProcess[str], float]:
    """The command on the cluster without accounting, bounded; (its result, when it ended). A command past the
    bound is killed, its jobs cancelled, and the test fails saying so."""
    proc = subprocess.Popen([sys.executable, "-m", "harness", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO, env=_env(conf, **env))
    try:
        stdout, stderr = proc.communicate(timeout=bound_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate(timeout=30)
        ids = [i for line in re.findall(r"job\(s\) submitted: (.+)", stderr) for i in line.split()]
        if ids:  # done long ago in the bug's case; cancelled in any case, so none outlives the test
            subprocess.run(["scancel", *ids], env=_env(conf), capture_output=True, timeout=30)
        said = [line for line in stderr.splitlines() if line.startswith("slurm:")]  # not submitit's sacct warnings
        pytest.fail(f"{args[0]} on the cluster without accounting still waiting after {bound_s:.0f} s "
                    f"(issue 37): " + " | ".join(said[-4:]))
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), time.time()


def test_the_cluster_has_no_accounting(slurm_conf_no_accounting: str) -> None:
    """What the executor meets: sacct refuses, scontrol and squeue answer."""
    env = _env(slurm_conf_no_accounting)
    sacct = subprocess.run(["sacct", "-n", "-X"], env=env, capture_output=True, text=True, timeout=30)
    assert "accounting storage is disabled" in (sacct.stdout + sacct.stderr).lower(), sacct
    assert subprocess.run(["scontrol", "ping"], env=env, capture_output=True, timeout=30).returncode == 0


def test_nightly_without_accounting_gives_the_verdicts_and_ends(slurm_conf_no_accounting: str, pg_url: str,
                                                                tmp_path: Path) -> None:
    scenario = _scenario(tmp_path, "night", matrix=True)
    began = time.monotonic()
    res, ended = _cli(slurm_conf_no_accounting, "nightly", scenario, "--build", "sim:pre-fix", "--trials", "1",
                      "--store", pg_url, "--out", tmp_path, "--no-progress", "--executor", "slurm", "--slurm-poll",
                      "1", "--slurm-gpu-type", "H200=h200")
    took = time.monotonic() - began
    assert res.returncode == 1, res.stdout + res.stderr  # a new signature, as with accounting
    assert "NEW-SIGNATURE" in res.stdout
    assert len(_job_ids(res.stderr)) == 2
    assert FALLBACK in res.stderr, res.stderr  # the states came from scontrol, squeue and the folders
    with open_store(pg_url) as store:
        records = store.records()
    assert sorted((r.case.name, r.outcome.value, r.signature) for r in records) == NIGHTLY_VERDICTS
    last_end = max(_when(r)[1] for r in records)
    assert ended - last_end < TAIL_S, (f"the command ended {ended - last_end:.0f} s after its last job", res.stderr)
    print(f"nightly without accounting: {took:.1f} s, {ended - last_end:.1f} s after the last job's run")


def test_compare_without_accounting_holds_every_expectation(slurm_conf_no_accounting: str, pg_url: str,
                                                            tmp_path: Path) -> None:
    scenario = _scenario(tmp_path, "pair", gpus=1)
    began = time.monotonic()
    res, _ = _cli(slurm_conf_no_accounting, "compare", scenario, "--reference", "--trials", "1", "--out", tmp_path,
                  "--store", pg_url, "--executor", "slurm", "--slurm-gpu-type", "H200=h200", "--slurm-poll", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "verdict: every expectation held" in res.stdout and FALLBACK in res.stderr
    assert len(_job_ids(res.stderr)) == 2
    with open_store(pg_url) as store:
        records = store.records()
    assert len(records) == 2 and all(r.outcome is Outcome.PASS for r in records), [(r.outcome, r.reason)
                                                                                   for r in records]
    print(f"compare without accounting: {time.monotonic() - began:.1f} s")


def test_bisect_jobs_without_accounting_names_the_culprit(slurm_conf_no_accounting: str, pg_url: str,
                                                          tmp_path: Path) -> None:
    """``bisect --executor slurm --jobs 4``: rounds of four jobs, each placed without sacct."""
    from harness.bisect.demo_repo import make_demo_repo
    from tests.slurm.test_bisect_fleet import LAYOUT, SCENARIO

    named = make_demo_repo(tmp_path / "demo", LAYOUT, step_cost_ms=20.0, scheduler="standin")  # the job states: the stand-in
    began = time.monotonic()
    res, _ = _cli(slurm_conf_no_accounting, "bisect", SCENARIO, "--repo", tmp_path / "demo", "--good", named["c0"],
                  "--bad", named[f"c{LAYOUT.fix - 1}"], "--trials", "1", "--confirm-trials", "1", "--out",
                  tmp_path / "out", "--store", pg_url, "--slurm-poll", "1", "--executor", "slurm", "--jobs", "4",
                  bound_s=600.0, SGLANG_REPRO_CACHE=str(tmp_path / "cache"), PYTHONPATH=str(REPO))
    assert res.returncode == 0, res.stdout + res.stderr
    assert FALLBACK in res.stderr, res.stderr
    (path,) = (tmp_path / "out").glob("bisect/*/report.json")
    report = json.loads(path.read_text())["commits"]
    assert report["culprit"]["commit"] == named["culprit"] and report["confirmed"] and report["jobs"] == 4
    print(f"bisect --jobs 4 without accounting: {time.monotonic() - began:.1f} s, {report['rounds']} rounds")


def _daemons_of_removed_clusters() -> list[str]:
    """Processes that name a cluster folder (``repro-slurm-*``, in argv or ``SLURM_CONF``) that is gone: orphans."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            text = ((proc / "cmdline").read_bytes() + b"\0" + (proc / "environ").read_bytes()).decode(errors="replace")
        except OSError:  # ended meanwhile, or not ours to read
            continue
        for folder in set(re.findall(r"/[^\0=:]*/repro-slurm-[^/\0]+", text)):
            if not Path(folder).exists():
                found.append(f"{proc.name}: {text.split(chr(0))[0]} ({folder})")
    return found


def test_a_start_that_fails_leaves_no_daemon(tmp_path: Path) -> None:
    """A cluster that does not come up in time (here: no time at all) stops what it had started."""
    if _cluster.missing_binaries(accounting=False) or os.geteuid() != 0:
        pytest.skip("needs slurm-wlm and munge, as root")
    with pytest.raises(RuntimeError, match="not ready after"):
        _cluster.start(tmp_path / "c", accounting=False, timeout_s=0.0)
    assert not (tmp_path / "c" / "cluster").exists()
    deadline = time.monotonic() + 30  # stop() waits for each daemon; a last look after any straggler exits
    while (left := _daemons_of_removed_clusters()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, left
