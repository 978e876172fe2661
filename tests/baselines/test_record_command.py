"""`sglang-repro baselines record` as a user runs it (a subprocess): from a real SQLite store, after an
acknowledged incident, with the change shown before writing; bad input is one line and exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.baselines.files import load
from harness.records.run_record import record_from_dict
from harness.store.store import new_batch, open_store

REPO = Path(__file__).resolve().parents[2]
GUARD = REPO / "scenarios" / "frozen_kv_mtp" / "accept_length_guard.yaml"
NAME = "frozen-kv-mtp-accept-length-guard"


def _run(minute: int, accept: float):
    return record_from_dict(dict(
        run_id=f"run-{minute}", scenario={"name": NAME, "file": str(GUARD)},
        case={"name": "draft=topk1", "values": {"draft": "topk1"}},
        build={"kind": "sim", "spec": "sim:post-fix", "role": "after", "reference_server": True},
        trial=0, outcome="pass", reason="all checks held",
        metrics={"accept_length": accept, "accept_rate_pos1": accept - 1.4, "requests_ok": 8, "requests_failed": 0},
        server={"log": ""}, host={"cpu": "Test CPU 9000", "cpu_count": 4},
        started_at=f"2026-12-03T10:{minute:02d}:00+00:00", duration_s=1.0, harness_version="test", artifacts="",
    ))


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", "baselines", "record", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "SGLANG_REPRO_BASELINES": str(tmp_path / "refs"),
            "SGLANG_REPRO_STORE": f"sqlite:///{tmp_path / 'results.db'}"}


def test_from_store_since_ack_takes_the_nights_after_the_acknowledgement(tmp_path: Path, env: dict[str, str]) -> None:
    with open_store(env["SGLANG_REPRO_STORE"]) as store:
        # Three nights before an intended improvement, three after it; the incident acknowledged between them.
        store.record_many([_run(m, 1.84 + 0.001 * m) for m in (1, 2, 3)] +
                          [_run(m, 2.10 + 0.001 * m) for m in (11, 12, 13)], new_batch("nightly"))
        store.add_alerts([dict(fingerprint="f1", kind="metric", scenario=NAME, case_name="draft=topk1",
                               metric="accept_length", hardware_key="cpu:4xTest CPU 9000", first_bad="x", detail="",
                               bisect="", state="acknowledged", batch_id="b", created_at="2026-12-03T10:05:00+00:00",
                               updated_at="2026-12-03T10:10:00.000000+00:00", incident="f1")])
    common = (str(GUARD), "--build", "after", "--reference", "--case", "draft=topk1", "--from-store")
    first = _cli(*common, env=env)  # every run in the store: the old and the new figures together
    assert first.returncode == 0, first.stderr
    assert "6 run(s) from the store" in first.stdout
    dry = _cli(*common, "--since-ack", "--dry-run", "--why", "incident f1: new drafter", env=env)
    assert dry.returncode == 0, dry.stderr
    assert "3 run(s) from the store after the acknowledgement" in dry.stdout
    assert "+  accept_length: {mean: 2.112, sd: 0.001}" in dry.stdout and "dry run: nothing written" in dry.stdout
    path = tmp_path / "refs" / f"{NAME}.yaml"
    refs = load(path)
    assert refs is not None and refs.baselines[0].trials == 6  # the dry run wrote nothing
    done = _cli(*common, "--since-ack", "--why", "incident f1: new drafter", env=env)
    assert done.returncode == 0, done.stderr
    refs = load(path)
    assert refs is not None
    entry = refs.find("draft=topk1", "cpu Test CPU 9000 x4", "sim:post-fix")
    assert entry is not None and entry.trials == 3 and entry.accept_length is not None
    assert entry.accept_length.mean == pytest.approx(2.112)
    assert entry.replaced[0].trials == 6 and entry.replaced[0].why == "incident f1: new drafter"


def test_since_ack_without_an_acknowledged_incident_says_so(env: dict[str, str]) -> None:
    with open_store(env["SGLANG_REPRO_STORE"]) as store:
        store.record_many([_run(1, 1.84)], new_batch("nightly"))
    result = _cli(str(GUARD), "--build", "after", "--reference", "--from-store", "--since-ack", env=env)
    assert result.returncode == 2
    assert "no acknowledged incident" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_build_that_is_not_a_role_is_one_line_and_exit_2(env: dict[str, str]) -> None:
    result = _cli(str(GUARD), "--build", "sim:post-fix", "--dry-run", env=env)
    assert result.returncode == 2
    assert "give ROLE or ROLE=SPEC with ROLE one of before, after" in result.stderr
