"""The local probe jobs of ``bisect --jobs K`` (harness.bisect.fleet.LocalProbes): real child processes."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from harness.bisect.fleet import LocalProbes, ProbeJob
from harness.bisect.oracle import Find, Limits, Target, Verdict
from harness.bisect.probe import SearchState
from harness.scenario.model import Hardware
from harness.store.store import new_batch
from harness.util.errors import InfraError

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "fixtures" / "bisect" / "stale_out_cache_loc_tiny.yaml"

# A claim about the harness, not the model: its reference servers are the torch-free stand-in (tests/conftest.py).
pytestmark = pytest.mark.standin


def _job(tmp_path: Path, *, scenario: Path, deadline_s: float, spec: str = "sim:pre-fix") -> ProbeJob:
    state = SearchState(scenario=str(scenario), case="default", build_template=spec,
                        target=Target(signature="frozen-kv-mtp-stale-out-cache-loc"), limits=Limits(),
                        find=Find.REGRESSION, report_dir=str(tmp_path), store=None, batch=new_batch("bisect"),
                        experiment="x", expected_steps=1, started=time.time(), out_root=str(tmp_path))
    return ProbeJob(state=state, store=None, mode="judge", kind="step", revision="0" * 40, label="r", spec=spec,
                    hardware=Hardware(gpus=0), deadline_s=deadline_s, index=1)


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def test_a_probe_whose_oracle_fails_stops_the_search(tmp_path: Path) -> None:
    """A broken oracle (here: the scenario is gone) must not steer the search as a skip would."""
    before = _children()
    with pytest.raises(InfraError, match="the oracle failed at 000000000000"):
        LocalProbes(2, tmp_path / "probes").run([_job(tmp_path, scenario=tmp_path / "gone.yaml", deadline_s=120)])
    assert _children() <= before  # nothing of its own left (an earlier test's child may end meanwhile)


def test_k_probes_run_at_once_and_a_probe_past_its_bound_is_a_skip(tmp_path: Path) -> None:
    before = _children()
    started = time.monotonic()
    slow = _job(tmp_path, scenario=SCENARIO, deadline_s=1.0)  # too short for any run: stopped, TERM then KILL
    fine = [_job(tmp_path, scenario=SCENARIO, deadline_s=240) for _ in range(2)]
    fine = [ProbeJob(**{**f.__dict__, "index": i + 2}) for i, f in enumerate(fine)]
    answers = LocalProbes(3, tmp_path / "probes").run([slow, *fine])
    assert answers[0].step is not None and answers[0].step.verdict is Verdict.SKIP
    assert "probe process exited" in answers[0].step.reason
    for answer in answers[1:]:  # the pre-fix reference server shows the searched crash
        assert answer.step is not None and answer.step.verdict is Verdict.BAD, answer.step
    assert _children() <= before  # no probe, no server outlives the round
    assert len({p.name for p in (tmp_path / "probes").glob("*.log")}) == 3
    assert time.monotonic() - started < 240


@pytest.mark.parametrize(("extra", "words"), [
    (("--repo", str(REPO), "--good", "HEAD~1", "--bad", "HEAD", "--executor", "slurm", "--jobs", "2"),
     "is an SQLite file, which jobs on other machines cannot share safely"),
    (("--releases", "0.5.14..0.5.15", "--executor", "slurm", "--store", "postgresql+psycopg://u@127.0.0.1:1/x"),
     "bisect --executor slurm searches commits"),
])
def test_unsafe_or_unsupported_fleet_bisects_are_refused_in_one_line(extra: tuple[str, ...], words: str,
                                                                     tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "harness", "bisect", str(SCENARIO), "--out", str(tmp_path / "o"),
                           *extra], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], done.stderr
    assert not (tmp_path / "o").exists()  # nothing started, nothing written
