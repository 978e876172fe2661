"""``--executor slurm`` end to end: real SLURM daemons, the CPU reference server inside the jobs, a real PostgreSQL."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from harness.executor.slurm import gres_for
from harness.records.outcome import Outcome
from harness.records.run_record import RunRecord, read_record
from harness.scenario.model import Hardware
from harness.store.store import open_store
from tests.slurm import _cluster

REPO = Path(__file__).resolve().parents[2]
LONG = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"
# The matrix scenario's nightly verdicts (sim:pre-fix), locally and on SLURM with or without accounting.
NIGHTLY_VERDICTS = [("path=eager", "crash", "frozen-kv-mtp-stale-out-cache-loc"), ("path=graph", "pass", None)]


def _scenario(tmp_path: Path, name: str, *, gpus: int = 2, matrix: bool = False) -> Path:
    """A short reference-server scenario that asks for ``gpus`` H200s; with ``matrix`` two cases (eager path
    crashes before the fix, graph path passes)."""
    data = yaml.safe_load(LONG.read_text())
    data["matrix"] = {"path": data["matrix"]["path"]} if matrix else None
    if not matrix:
        data.pop("matrix")
        data["server"]["args"].update({"speculative-num-steps": 5, "speculative-num-draft-tokens": 6})
        data["expect"] = {"before": {"outcome": "pass"}, "after": {"outcome": "pass"}}  # the graph path passes
    data["workload"].update(requests=3, concurrency=1, max_new_tokens=24, prompt={"tokens": 276, "seed": 5})
    data["hardware"] = {"gpus": gpus, "gpu_name": "H200"}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _cli(*args: object, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


def _job_ids(stderr: str) -> list[str]:
    match = re.search(r"job\(s\) submitted: (.+)", stderr)
    assert match, stderr
    return match.group(1).split()


def _queued(job_ids: list[str]) -> list[str]:
    """The given jobs squeue still lists (any state)."""
    mains = sorted({j.split("_")[0] for j in job_ids})
    out = subprocess.run(["squeue", "-h", "-o", "%i %T", "-j", ",".join(mains)], capture_output=True, text=True,
                         timeout=30)
    return [line for line in out.stdout.splitlines() if line.strip()]


def _left_queue(job_ids: list[str], timeout_s: float = 90) -> bool:
    """Whether the jobs leave squeue in time: a job ends (sacct's state) before slurmd has finished killing
    it (COMPLETING), and scancel is asynchronous."""
    deadline = time.monotonic() + timeout_s
    while _queued(job_ids):
        if time.monotonic() > deadline:
            return False
        time.sleep(1)
    return True


def _when(record: RunRecord) -> tuple[float, float]:
    start = datetime.fromisoformat(record.started_at).timestamp()
    return start, start + record.duration_s


# --------------------------------------------------------------------------- without a cluster


def test_gres_follows_the_scenarios_hardware() -> None:
    assert gres_for(Hardware(gpus=2, gpu_name="H200"), {"H200": "h200"}) == "gpu:h200:2"
    assert gres_for(Hardware(gpus=4, gpu_name="L40S"), {"H200": "h200"}) == "gpu:4"  # the cluster names no L40S type
    assert gres_for(Hardware(gpus=1, gpu_name="NVIDIA H200 NVL"), {"H200": "h200"}) == "gpu:h200:1"
    assert gres_for(Hardware(gpus=0), {"H200": "h200"}) is None


@pytest.mark.parametrize("command", ["run", "nightly", "compare"])
def test_an_sqlite_store_is_refused_before_anything_is_submitted(command: str, tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    extra = {"run": ["--build", "sim:pre-fix"], "nightly": ["--build", "sim:pre-fix"], "compare": ["--reference"]}
    res = _cli(command, LONG, "--case", "tokens=276,path=eager", *extra[command], "--store", db, "--out", tmp_path,
               "--executor", "slurm", timeout=120)
    assert res.returncode == 2, res.stdout + res.stderr
    line = res.stderr.strip().splitlines()[-1]  # compare first names what it compares
    assert "SQLite" in line and str(db) in line and "postgresql" in line
    assert not db.exists() and not (tmp_path / "runs").exists() and not (tmp_path / "slurm").exists()


# --------------------------------------------------------------------------- on the one-node cluster


# A claim about the harness, not the model: its reference servers are the torch-free stand-in (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.standin]


def test_compare_trials_run_at_once_on_disjoint_gpus_into_postgres(slurm_conf: str, pg_url: str,
                                                                   tmp_path: Path) -> None:
    scenario = _scenario(tmp_path, "pair")
    res = _cli("compare", scenario, "--reference", "--trials", "2", "--out", tmp_path, "--store", pg_url,
               "--executor", "slurm", "--slurm-gpu-type", "H200=h200", "--slurm-poll", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "verdict: every expectation held" in res.stdout
    assert len(_job_ids(res.stderr)) == 4 and "2 running" in res.stderr
    with open_store(pg_url) as store:
        records = store.records()
    assert len(records) == 4 and all(r.outcome is Outcome.PASS for r in records)
    # Every job saw the two GPUs SLURM gave it; jobs that overlapped in time had disjoint sets.
    sets = [set(r.host.cuda_visible_devices.split(",")) for r in records if r.host.cuda_visible_devices]
    assert len(sets) == 4 and all(len(s) == 2 for s in sets)
    overlapped = 0
    for i, a in enumerate(records):
        for b in records[i + 1:]:
            (a0, a1), (b0, b1) = _when(a), _when(b)
            if a0 < b1 and b0 < a1:
                overlapped += 1
                assert not set(str(a.host.cuda_visible_devices).split(",")) & set(
                    str(b.host.cuda_visible_devices).split(","))
    assert overlapped >= 1
    for r in records:  # the artifacts sit under --out, which every node sees
        assert Path(r.artifacts).resolve().is_relative_to(tmp_path.resolve()) and (Path(r.artifacts) / "server.log").is_file()


def test_nightly_through_slurm_gives_the_local_verdicts(slurm_conf: str, pg_server: str, tmp_path: Path) -> None:
    from tests.store.conftest import _fresh_pg_database

    scenario = _scenario(tmp_path, "night", matrix=True)
    verdicts = {}
    for executor in ("slurm", "local"):
        url = _fresh_pg_database(pg_server)
        out = tmp_path / executor
        res = _cli("nightly", scenario, "--build", "sim:pre-fix", "--trials", "1", "--store", url, "--out", out,
                   "--no-progress", "--executor", executor, "--slurm-poll", "1", "--slurm-gpu-type", "H200=h200")
        assert res.returncode == 1, res.stdout + res.stderr  # a new signature: something new tonight
        assert "NEW-SIGNATURE" in res.stdout
        with open_store(url) as store:
            verdicts[executor] = sorted((r.case.name, r.outcome.value, r.signature) for r in store.records())
        if executor == "slurm":
            assert len(_job_ids(res.stderr)) == 2
            assert "sacct has no record of it" not in res.stderr  # with accounting, sacct placed every job
    assert verdicts["slurm"] == verdicts["local"] == NIGHTLY_VERDICTS


def _slow_run(tmp_path: Path, pg_url: str, *extra: str) -> subprocess.Popen[str]:
    """``run --trials 2`` of a case that takes minutes (each decode step costs 3 s), as jobs; stderr to a file."""
    scenario = _scenario(tmp_path, "slow", gpus=1)
    # Minutes whatever the acceptance: 8 requests of 24 tokens at up to 6 a step is >= 32 steps of 3 s; with
    # 3 requests a run could pass just inside a one-minute limit.
    data = yaml.safe_load(scenario.read_text())
    data["workload"]["requests"] = 8
    scenario.write_text(yaml.safe_dump(data))
    err = open(tmp_path / "stderr.txt", "w")  # noqa: SIM115 - the child writes it
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", str(scenario), "--build",
                             "sim:post-fix,step-cost-ms=3000", "--trials", "2", "--out", str(tmp_path),
                             "--store", pg_url, "--executor", "slurm", "--slurm-poll", "1", *extra],
                            stdout=subprocess.PIPE, stderr=err, text=True, cwd=REPO)
    err.close()
    return proc


def _wait_for_text(path: Path, pattern: str, proc: subprocess.Popen[str], timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = path.read_text()
        if re.search(pattern, text):
            return text
        assert proc.poll() is None, text
        time.sleep(0.5)
    raise AssertionError(f"{pattern!r} not seen in {timeout_s} s: {path.read_text()}")


def _wait_for_servers(out: Path, n: int, proc: subprocess.Popen[str], timeout_s: float) -> None:
    """Until ``n`` runs under ``out`` have a server that said it is ready (the reference server's log line)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        logs = [*out.glob("**/runs/*/server.log"), *out.glob("**/servers/*/server.log")]
        if sum("ready to roll" in log.read_text(errors="replace") for log in logs) >= n:
            return
        assert proc.poll() is None, (out / "stderr.txt").read_text()
        time.sleep(0.5)
    raise AssertionError(f"not {n} ready servers under {out} in {timeout_s} s")


def test_scancel_and_the_time_limit_end_as_infra_with_slurms_reason(slurm_conf: str, pg_url: str,
                                                                    tmp_path: Path) -> None:
    proc = _slow_run(tmp_path, pg_url, "--time", "1")
    try:
        text = _wait_for_text(tmp_path / "stderr.txt", r"2 running", proc, 120)
        first, second = _job_ids(text)
        _wait_for_servers(tmp_path, 2, proc, 120)  # a job's run past its start: the cancel meets its workload
        subprocess.run(["scancel", first], check=True, timeout=30)
        stdout, _ = proc.communicate(timeout=240)  # the second runs into its one-minute limit
    finally:
        if proc.poll() is None:
            proc.kill()
            subprocess.run(["scancel", *_job_ids((tmp_path / "stderr.txt").read_text())], timeout=30)
    assert proc.returncode == 3, stdout + (tmp_path / "stderr.txt").read_text()
    with open_store(pg_url) as store:
        records = {r.reason.split()[2]: r for r in store.records()}
    assert set(records) == {first, second}, [(r.outcome, r.reason, r.artifacts) for r in records.values()]
    assert all(r.outcome is Outcome.INFRA for r in records.values())
    assert "CANCELLED by 0" in records[first].reason and "TIMEOUT" in records[second].reason
    for r in records.values():  # the record names the job's folder, where slurmstepd wrote why
        assert read_record(Path(r.artifacts)).reason == r.reason
    assert "DUE TO TIME LIMIT" in "".join(p.read_text() for p in Path(records[second].artifacts).glob("*.err"))
    assert _left_queue([first, second]), _queued([first, second])


def test_a_job_cancelled_while_slurmdbd_is_down_takes_sacct_s_state_once_it_is_back(slurm_conf: str, pg_url: str,
                                                                                  tmp_path: Path) -> None:
    """CI: a scancelled job that slurmdbd had not recorded yet (sacct had no line for it) was recorded with
    scontrol's bare "CANCELLED", no "by UID" and no node. Here sacct cannot place the job at all until slurmdbd
    is back; the submitter waits for it (harness/executor/slurm.py's _SACCT_LAG_S) rather than take scontrol's."""
    stderr = tmp_path / "stderr.txt"
    with _cluster.slurmdbd_down(slurm_conf):
        proc = _slow_run(tmp_path, pg_url, "--trials", "1")
        try:
            (job,) = _job_ids(_wait_for_text(stderr, r"1 running", proc, 120))
            _wait_for_servers(tmp_path, 1, proc, 120)
            subprocess.run(["scancel", job], check=True, timeout=30)
            deadline = time.monotonic() + 60
            while "JobState=CANCELLED" not in subprocess.run(["scontrol", "show", "job", "-o", job], text=True,
                                                              capture_output=True, timeout=30).stdout:
                assert time.monotonic() < deadline, "scontrol never said CANCELLED"
                time.sleep(0.5)
            time.sleep(3)  # three polls of the submitter with scontrol's CANCELLED and no sacct
            assert proc.poll() is None and "1 done" not in stderr.read_text(), stderr.read_text()
        except BaseException:
            proc.kill()
            subprocess.run(["scancel", *_job_ids(stderr.read_text())], timeout=30)
            raise
    stdout, _ = proc.communicate(timeout=180)
    assert proc.returncode == 3, stdout + stderr.read_text()
    with open_store(pg_url) as store:
        (record,) = store.records()
    assert f"slurm job {job} CANCELLED by 0 on {_cluster.NODE}:" in record.reason, record.reason
    assert "sacct has no record" not in stderr.read_text()


def test_a_job_ended_after_its_run_gives_the_runs_record_and_no_infra_one(slurm_conf: str, pg_url: str,
                                                                          tmp_path: Path) -> None:
    """CI saw a time-limited job finish its run and record a pass just before SLURM ended it: the submitter
    added an infra record for the same trial beside it. A job's run hands its record back into the job's
    folder before the store sees it, and the submitter takes that one."""
    from harness.executor.job import HANDED_BACK, RunJob
    from harness.executor.slurm import SlurmExecutor, SlurmOptions
    from harness.scenario import load_file
    from harness.store.store import new_batch
    from harness.store.writer import StoreWriter
    from tests.slurm.lingering import run_then_linger

    scenario = _scenario(tmp_path, "linger", gpus=1)
    case = load_file(scenario).cases[0]
    job = RunJob(scenario_file=str(scenario), case=case.name, spec="sim:post-fix", role="after", trial=0,
                 out_root=str(tmp_path), hardware=case.scenario.hardware, deadline_s=600.0, store=pg_url,
                 batch=(batch := new_batch("run")))
    folder = tmp_path / "slurm"
    cancelled: list[str] = []

    def cancel_once_handed_back() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not cancelled:
            for marker in folder.glob(f"*/{HANDED_BACK}"):
                subprocess.run(["scancel", marker.parent.name], check=True, timeout=30)
                cancelled.append(marker.parent.name)
            time.sleep(0.5)

    import threading

    watcher = threading.Thread(target=cancel_once_handed_back, daemon=True)
    watcher.start()
    # As the commands do (harness.executor.fanout): every record that comes back is recorded, which is a no-op
    # for one the job stored itself. The scancel may reach the job before its own store write.
    with StoreWriter(pg_url, batch) as writer:
        def store_it(arrived: RunRecord) -> None:
            writer.record(arrived)

        (record,) = SlurmExecutor(SlurmOptions(folder=folder, poll_s=1), call=run_then_linger).run_all(
            [job], on_record=store_it)
    watcher.join(timeout=10)
    assert cancelled, "the job never handed its record back"
    assert record.outcome is Outcome.PASS and record.reason == "all checks held", record.reason
    with open_store(pg_url) as store:
        assert [(r.run_id, r.outcome) for r in store.records()] == [(record.run_id, Outcome.PASS)]
    assert _left_queue(cancelled)


def test_ctrl_c_of_the_submitter_cancels_its_jobs(slurm_conf: str, pg_url: str, tmp_path: Path) -> None:
    proc = _slow_run(tmp_path, pg_url)
    try:
        text = _wait_for_text(tmp_path / "stderr.txt", r"2 running", proc, 120)
        ids = _job_ids(text)
        proc.send_signal(signal.SIGINT)
        stdout, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            subprocess.run(["scancel", *_job_ids((tmp_path / "stderr.txt").read_text())], timeout=30)
    assert proc.returncode == 3, stdout + (tmp_path / "stderr.txt").read_text()
    assert _left_queue(ids), _queued(ids)
    with open_store(pg_url) as store:
        records = store.records()
    assert len(records) == 2 and all(r.outcome is Outcome.INTERRUPTED and "Ctrl-C" in r.reason for r in records)
    assert os.environ[_cluster.CONF_ENV] == slurm_conf


def test_the_local_executor_runs_the_same_jobs_here(tmp_path: Path) -> None:
    from harness.executor.job import PlannedCase, jobs_for
    from harness.executor.local import LocalExecutor
    from harness.scenario import load_file, select_cases

    scenario = _scenario(tmp_path, "here", matrix=True)
    (case,) = select_cases(load_file(scenario), "path=eager")
    seen: list[RunRecord] = []
    (record,) = LocalExecutor().run_all(jobs_for([PlannedCase(case, "sim:pre-fix", None)], 1, tmp_path), seen.append)
    assert seen == [record] and record.outcome is Outcome.CRASH
    assert record.signature == "frozen-kv-mtp-stale-out-cache-loc"
    assert Path(record.artifacts).resolve().is_relative_to(tmp_path.resolve())


def test_jobs_sbatch_refuses_end_the_command_as_infra_in_one_line(slurm_conf: str, pg_url: str,
                                                                  tmp_path: Path) -> None:
    res = _cli("run", _scenario(tmp_path, "nowhere"), "--build", "sim:post-fix", "--out", tmp_path, "--store", pg_url,
               "--executor", "slurm", "--partition", "no-such-partition")
    assert res.returncode == 3, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()  # sbatch's own error lines (submitit lets them through), then ours
    assert lines[-1].startswith("sglang-repro: --executor slurm: sbatch refused the jobs")
    assert "partition" in lines[-1].lower() and sum(line.startswith("sglang-repro:") for line in lines) == 1
    with open_store(pg_url) as store:
        assert store.count_runs() == 0
