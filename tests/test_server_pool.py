"""Trials that share a server: one start per role, per-trial ground truth, a fresh server after a failure."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness.pipeline import RunOptions, execute_run
from harness.records.outcome import Outcome
from harness.scenario import load_file, select_cases
from harness.server.pool import ServerPool

REPO = Path(__file__).resolve().parent.parent
LONG = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"

# A claim about the harness, not the model: its reference servers are the torch-free stand-in (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.standin]


def _case(name: str, **server: object):
    (case,) = select_cases(load_file(LONG), name)
    if server:
        sc = case.scenario.model_copy(update={"server": case.scenario.server.model_copy(update=server)})
        case = replace(case, scenario=sc, reference_scenario=None)
    return case


def test_trials_share_one_server_and_each_gets_its_own_ground_truth(tmp_path: Path) -> None:
    case = _case("tokens=276,path=graph")
    opts = RunOptions(out_root=tmp_path, progress=False)
    with ServerPool(tmp_path) as pool:
        records = [execute_run(case, "sim:post-fix", role="after", trial=t, options=opts, pool=pool) for t in range(3)]
        tag = records[0].run_id
        assert all(r.server.run_tag == tag for r in records), "one server served every trial"
    assert [r.outcome for r in records] == [Outcome.PASS] * 3
    assert [r.metric("server_trial") for r in records] == [None, 1.0, 2.0]
    assert records[0].metric("ready_s") is not None and records[1].metric("ready_s") is None
    for r in records:
        truth = r.ground_truth
        assert truth is not None
        # The model's counters restart with each trial: its window holds exactly this trial's requests.
        assert truth["completion_tokens"] == r.metric("completion_tokens")
        assert r.metric("accept_length") == pytest.approx(truth["accept_length"], rel=1e-9)
        assert (Path(r.artifacts) / "server.log").is_file()
    # The trial that started the server has its start-up in its slice of the shared log.
    assert "fired up and ready to roll" in (Path(records[0].artifacts) / "server.log").read_text()
    assert len(list((tmp_path / "servers").iterdir())) == 1


def test_a_crash_gets_a_fresh_server_for_the_next_trial(tmp_path: Path) -> None:
    case = _case("tokens=276,path=eager")
    opts = RunOptions(out_root=tmp_path, progress=False)
    with ServerPool(tmp_path) as pool:
        records = [execute_run(case, "sim:pre-fix", role="before", trial=t, options=opts, pool=pool) for t in range(2)]
    assert [r.outcome for r in records] == [Outcome.CRASH] * 2
    assert records[0].run_id != records[1].run_id and records[1].server.run_tag == records[1].run_id
    assert all(r.server.teardown is not None for r in records), "each crashed server was torn down at once"
    assert all("broadcast shape [276]" in (Path(r.artifacts) / "server.log").read_text() for r in records)


def test_a_scenario_can_ask_for_a_server_per_trial(tmp_path: Path) -> None:
    case = _case("tokens=276,path=graph", share_between_trials=False)
    opts = RunOptions(out_root=tmp_path, progress=False)
    with ServerPool(tmp_path) as pool:
        records = [execute_run(case, "sim:post-fix", trial=t, options=opts, pool=pool) for t in range(2)]
    assert all(r.metric("ready_s") is not None for r in records)
    assert len({r.server.run_tag for r in records}) == 2
