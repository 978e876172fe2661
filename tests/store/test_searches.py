"""The store as the memory of bisect and minimize, on SQLite and on a real PostgreSQL: every run they make is a
run record in a batch of theirs, found again by its search key and the harness version."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from harness.bisect.oracle import Find, Limits, Target, Verdict
from harness.bisect.probe import Probe, SearchState, experiment_key, load_case
from harness.bisect.step import read_state
from harness.records.outcome import Outcome
from harness.store.searches import SearchRuns, search_key
from harness.store.store import new_batch, open_store
from harness.store.url import STORE_ENV
from harness.version import harness_version
from tests.helpers import make_record

# A claim about the harness, not the model: its reference servers are the torch-free stand-in (tests/conftest.py).
pytestmark = pytest.mark.standin

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "fixtures" / "bisect" / "stale_out_cache_loc_tiny.yaml"
SIG = "frozen-kv-mtp-stale-out-cache-loc"


def _record(run_id: str, *, outcome: Outcome = Outcome.PASS, version: str = harness_version()):
    return replace(make_record(run_id=run_id, outcome=outcome, signature=SIG if outcome is Outcome.CRASH else None),
                   harness_version=version)


def test_known_runs_are_those_of_the_key_and_this_harness_version_in_order(store_url: str) -> None:
    runs = SearchRuns(store_url, new_batch("minimize", "20261201T000000-sc"))
    key, other = search_key("sim:pre-fix", "digest-1"), search_key("sim:pre-fix", "digest-2")
    assert runs.known(key) == []
    for i, outcome in enumerate((Outcome.CRASH, Outcome.PASS, Outcome.CRASH)):
        runs.record(key, _record(f"r{i}", outcome=outcome))
    runs.record(other, _record("o1"))
    runs.record(key, _record("old", version="0.0.1"))  # another harness may judge otherwise: not reused
    assert [r.run_id for r in runs.known(key)] == ["r0", "r1", "r2"]
    assert [r.outcome for r in runs.known(key)] == [Outcome.CRASH, Outcome.PASS, Outcome.CRASH]
    assert [r.run_id for r in runs.known(other)] == ["o1"]
    with open_store(store_url) as store:
        frame = store.runs_frame()
    assert set(frame["batch_kind"]) == {"minimize"} and set(frame["batch_label"]) == {"20261201T000000-sc"}


def test_without_a_store_nothing_is_recorded_or_known() -> None:
    runs = SearchRuns(None, new_batch("bisect"))
    runs.record("k", _record("r0"))
    assert runs.known("k") == []


def _state(tmp_path: Path, store: str | None) -> SearchState:
    case = load_case(SCENARIO, None)
    return SearchState(
        scenario=str(SCENARIO), case=case.name, build_template="sim:pre-fix",
        target=Target(signature=SIG, crash_rate=1.0), limits=Limits(trials=1), find=Find.REGRESSION,
        report_dir=str(tmp_path), store=store, batch=new_batch("bisect", "20261201T000000-bisect-test"),
        experiment=experiment_key(SCENARIO.read_text(), case.name, "sim"), expected_steps=1, started=time.time(),
        out_root=str(tmp_path / "first"))


def test_the_step_reaches_the_searchs_store_and_state_json_holds_no_password(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    url = "postgresql+psycopg://bisect:s3cret@db.example:5432/results"
    state = _state(tmp_path, url)
    text = state.to_json()
    assert "s3cret" not in text and json.loads(text)["batch"]["kind"] == "bisect"
    (tmp_path / "state.json").write_text(text)
    monkeypatch.setenv(STORE_ENV, url)  # as the search sets it for `git bisect run`
    assert read_state(tmp_path / "state.json") == state
    assert read_state(tmp_path / "state.json").store == url
    monkeypatch.setenv(STORE_ENV, "/elsewhere.db")
    no_store = _state(tmp_path, None)
    (tmp_path / "state.json").write_text(no_store.to_json())
    assert read_state(tmp_path / "state.json").store is None  # --no-cache stays --no-cache in the step


@pytest.mark.sim
def test_a_revision_judged_again_is_answered_from_the_store(store_url: str, tmp_path: Path) -> None:
    state = _state(tmp_path, store_url)
    case = load_case(SCENARIO, None)
    first = Probe(state, case).judge(kind="step", revision="c1", label="c1", spec="sim:pre-fix")
    assert (first.verdict, first.cached, first.launched) == (Verdict.BAD, 0, 1)
    again_state = replace(state, out_root=str(tmp_path / "again"), batch=new_batch("bisect", "again"))
    again = Probe(again_state, case).judge(kind="step", revision="c1", label="c1", spec="sim:pre-fix")
    assert (again.verdict, again.cached, again.launched) == (Verdict.BAD, 1, 0)
    assert again.trials == first.trials
    assert not list((tmp_path / "again").rglob("result.json"))  # no run was made
    # Fresh trials (the confirmation) never come from the store; another revision is another question.
    fresh = Probe(again_state, case).judge(kind="confirm", revision="c1", label="c1", spec="sim:pre-fix",
                                           fresh_trials=1)
    assert (fresh.cached, fresh.launched) == (0, 1)
    with open_store(store_url) as store:
        frame = store.runs_frame()
    assert len(frame) == 2 and set(frame["batch_kind"]) == {"bisect"}
    assert sorted(frame["batch_label"]) == ["20261201T000000-bisect-test", "again"]


def test_both_commands_take_a_store() -> None:
    from harness.cli import make_parser

    parser = make_parser()
    args = parser.parse_args(["bisect", str(SCENARIO), "--store", "postgresql://h/db", "--repo", "."])
    assert args.store == "postgresql://h/db" and not args.no_cache
    args = parser.parse_args(["minimize", str(SCENARIO), "--build", "sim:pre-fix", "--store", "r.db"])
    assert (args.store, args.no_store) == ("r.db", False)
    assert parser.parse_args(["minimize", str(SCENARIO), "--build", "sim:pre-fix", "--no-store"]).no_store
    for argv in (["bisect", str(SCENARIO), "--store", "r.db", "--no-cache"],  # one or the other
                 ["minimize", str(SCENARIO), "--build", "sim:pre-fix", "--cache", "c.json"]):  # no JSON cache
        with pytest.raises(SystemExit) as exc:
            parser.parse_args(argv)
        assert exc.value.code == 2
