"""Issue 37: SLURM without accounting (AccountingStorageType=accounting_storage/none). sacct answers "Slurm
accounting storage is disabled" and submitit's watcher says UNKNOWN for ever; the executor places the job with
scontrol, squeue and the job's folder instead, and never waits without end.

The cluster's commands are stand-ins on PATH that answer as such a cluster does (tests/slurm's real cluster
has accounting); the executor, submitit's job handles and its result pickles are the real ones."""

from __future__ import annotations

import pickle
import time
from pathlib import Path

import pytest

from harness.executor.job import RunJob
from harness.executor.slurm import SlurmExecutor, SlurmOptions, _Tracked, state_without_accounting
from harness.records.outcome import Outcome
from harness.scenario.model import Hardware
from tests.helpers import make_record
from tests.hostile._probe import CASE, SEED


def _on_path(bin_dir: Path, scripts: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of ``scripts`` (name -> bash body) as an executable in ``bin_dir``, first on PATH."""
    bin_dir.mkdir()
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/bash\n{body}\n")
        path.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A queue folder: ``queue/<job id>`` holds the job's state while squeue lists it."""
    queue = tmp_path / "queue"
    queue.mkdir()
    scripts = {
        "sacct": 'echo "sacct: error: Slurm accounting storage is disabled" >&2; exit 1',
        # squeue -h -j ID -o %T: the state while queued; once gone, slurmctld says the id is invalid
        "squeue": f'id="$3"; if [ -f "{queue}/$id" ]; then cat "{queue}/$id"; '
                  'else echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1; fi',
        # scontrol show job -o ID: forgotten at once (MinJobAge passed), as a busy cluster does
        "scontrol": 'echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1',
    }
    _on_path(tmp_path / "bin", scripts, monkeypatch)
    return queue


def _job(tmp_path: Path) -> RunJob:
    return RunJob(scenario_file=str(SEED), case=CASE, spec="sim:post-fix", role=None, trial=0,
                  out_root=str(tmp_path / "o"), hardware=Hardware(), deadline_s=60.0)


def _tracked(tmp_path: Path, job_id: str) -> _Tracked:
    import submitit

    handle: submitit.SlurmJob[object] = submitit.SlurmJob(folder=tmp_path / "jobs" / "%j", job_id=job_id)
    handle.paths.folder.mkdir(parents=True, exist_ok=True)
    return _Tracked(_job(tmp_path), handle)


def test_the_state_comes_from_squeue_then_from_the_job_folder(cluster: Path, tmp_path: Path) -> None:
    tracked = _tracked(tmp_path, "41")
    folder, pickle_path = tracked.handle.paths.folder, tracked.handle.paths.result_pickle
    (cluster / "41").write_text("RUNNING\n")
    assert state_without_accounting("41", folder, pickle_path) == "RUNNING"
    (cluster / "41").unlink()
    assert state_without_accounting("41", folder, pickle_path) == "ENDED"
    pickle_path.write_bytes(pickle.dumps(("success", None)))
    assert state_without_accounting("41", folder, pickle_path) == "COMPLETED"


def test_a_finished_job_hands_back_its_record_and_a_vanished_one_is_lost_not_waited_for(
        cluster: Path, tmp_path: Path) -> None:
    done, vanished = _tracked(tmp_path, "42"), _tracked(tmp_path, "43")
    (cluster / "42").write_text("RUNNING\n")
    (cluster / "43").write_text("PENDING\n")
    executor = SlurmExecutor(SlurmOptions(folder=tmp_path / "jobs", poll_s=0.2))
    import threading

    def finish() -> None:  # the jobs end a little later: one with its result, one killed without a trace
        time.sleep(1.0)
        done.handle.paths.result_pickle.write_bytes(pickle.dumps(("success", make_record(run_id="slurm-42"))))
        (cluster / "42").unlink()
        (cluster / "43").unlink()

    threading.Thread(target=finish, daemon=True).start()
    began = time.monotonic()
    executor._wait([done, vanished], None)
    assert time.monotonic() - began < 30
    assert done.record.run_id == "slurm-42" and done.record.outcome is Outcome.PASS
    assert vanished.record.outcome is Outcome.INFRA
    assert "left the queue without a record" in vanished.record.reason


@pytest.fixture
def lagging_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cluster with accounting whose slurmdbd is behind: scontrol already says a job is CANCELLED; sacct says
    what the file ``sacct-line`` holds (``STATE|NODE``), nothing while it is absent."""
    line = tmp_path / "sacct-line"
    scripts = {
        # submitit: sacct -o JobID,State,NodeList --parsable2 -j ID; the executor: sacct -X -n -P -j ID -o State,...
        "sacct": f'id=$(echo "$*" | sed -E "s/.*-j ([0-9_]+).*/\\1/"); [ -f "{line}" ] || exit 0; '
                 f'if [ "$2" = -n ]; then cat "{line}"; else echo "JobID|State|NodeList"; echo "$id|$(cat "{line}")"; fi',
        "scontrol": 'if [ "$2" = config ]; then echo "AccountingStorageType   = accounting_storage/slurmdbd"; '
                    'else echo "JobId=$4 JobName=x JobState=CANCELLED Reason=None"; fi',
        "squeue": 'exit 0',
        "scancel": f'echo "$@" >> "{tmp_path / "scancelled"}"',  # never the real one: CI's cluster has jobs too
    }
    _on_path(tmp_path / "bin", scripts, monkeypatch)
    return line


def test_an_ended_job_waits_for_sacct_to_say_who_cancelled_it_and_where(
        lagging_cluster: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """CI: a scancelled job that slurmdbd had not recorded yet got scontrol's bare "CANCELLED", no "by UID" and
    no node. And a slurmdbd that slurmctld has just reconnected to holds the job as "CANCELLED" for a while
    before "CANCELLED by 0" (tests/slurm/test_executor.py sees it on a real cluster)."""
    import threading

    cancelled = _tracked(tmp_path, "44")
    executor = SlurmExecutor(SlurmOptions(folder=tmp_path / "jobs", poll_s=0.2))
    threading.Timer(1.0, lagging_cluster.write_text, ["CANCELLED|node1\n"]).start()
    threading.Timer(2.5, lagging_cluster.write_text, ["CANCELLED by 0|node1\n"]).start()
    executor._wait([cancelled], None)
    assert cancelled.record.outcome is Outcome.INFRA
    assert "slurm job 44 CANCELLED by 0 on node1: SLURM ended the job" in cancelled.record.reason
    assert "sacct has no record" not in capfd.readouterr().err


def test_sacct_that_never_catches_up_ends_the_wait_with_scontrols_state_said_once(
        lagging_cluster: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    from harness.executor import slurm

    monkeypatch.setattr(slurm, "_SACCT_LAG_S", 1.0)
    cancelled = _tracked(tmp_path, "45")
    began = time.monotonic()
    SlurmExecutor(SlurmOptions(folder=tmp_path / "jobs", poll_s=0.2))._wait([cancelled], None)
    assert 1.0 <= time.monotonic() - began < 30
    assert "slurm job 45 CANCELLED: SLURM ended the job" in cancelled.record.reason
    err = capfd.readouterr().err
    assert err.count("sacct has no record of it yet (slurmdbd behind or down?)") == 1, err


def test_an_interrupt_while_an_ended_job_waits_for_sacct_records_slurms_end_not_the_interrupt(
        lagging_cluster: Path, tmp_path: Path) -> None:
    """Ctrl-C while a job SLURM already ended waits for sacct's whole state: that job is not cancelled again nor
    recorded as interrupted; it gets the state there is."""
    ended, running = _tracked(tmp_path, "46"), _tracked(tmp_path, "47")
    executor = SlurmExecutor(SlurmOptions(folder=tmp_path / "jobs", poll_s=0.2))
    ended.state, ended.ended_since = "CANCELLED", time.monotonic()
    records = executor._cancel([ended, running], None)
    assert records[0].outcome is Outcome.INFRA and "slurm job 46 CANCELLED" in records[0].reason
    assert records[1].outcome is Outcome.INTERRUPTED and "submitter was interrupted" in records[1].reason
    assert (tmp_path / "scancelled").read_text().split() == ["47"]
