"""The run record at its edge: result.json written and read back, every earlier schema version read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.records.outcome import Outcome, Phase
from harness.records.run_record import RECORD_SCHEMA_VERSION, experiment_digest, read_record, record_from_dict, record_to_dict
from harness.util.errors import UserError

V1 = Path(__file__).resolve().parent.parent / "fixtures" / "results" / "v1"


def test_a_result_json_written_by_schema_1_loads_with_its_facts() -> None:
    # Written by the harness before the typed record (main at e9268dc), by real runs on the reference server.
    crash = read_record(V1 / "crash-pre-fix.json")
    assert crash.outcome is Outcome.CRASH and crash.signature == "frozen-kv-mtp-stale-out-cache-loc"
    assert crash.case.name == "tokens=276,path=eager" and crash.build.role == "before"
    assert crash.build.reference_server and crash.phase is None
    assert "broadcast shape [276]" in crash.reason and crash.exit_code == 1
    assert crash.run_id  # derived from the run tag when the file had none
    passed = read_record(V1 / "pass-post-fix.json")
    assert passed.outcome is Outcome.PASS and passed.metric("accept_length") == pytest.approx(
        json.loads((V1 / "pass-post-fix.json").read_text())["metrics"]["accept_length"])
    assert passed.server.teardown is not None and passed.server.teardown.port_freed is True
    assert passed.host.hardware_key.startswith("cpu:")


def test_records_round_trip_through_the_current_schema(tmp_path: Path) -> None:
    old = read_record(V1 / "crash-pre-fix.json")
    data = record_to_dict(old)
    assert data["schema_version"] == RECORD_SCHEMA_VERSION and data["outcome"] == "crash"
    again = record_from_dict(json.loads(json.dumps(data)))
    assert again == old
    with_phase = record_from_dict({**data, "phase": "warm-up"})
    assert with_phase.phase is Phase.WARMUP


@pytest.mark.parametrize(("patch", "message"), [
    ({"outcome": "exploded"}, "outcome 'exploded' is not one of"),
    ({"phase": "lunch"}, "phase 'lunch' is not one of"),
    ({"schema_version": 99}, "newer than this harness reads"),
])
def test_bad_records_are_one_line_errors_naming_the_source(patch: dict, message: str) -> None:
    data = {**json.loads((V1 / "pass-post-fix.json").read_text()), **patch}
    with pytest.raises(UserError, match=message) as info:
        record_from_dict(data, source="x/result.json")
    assert str(info.value).startswith("x/result.json: ") and "\n" not in str(info.value)


def test_unreadable_result_json_is_a_user_error(tmp_path: Path) -> None:
    (tmp_path / "result.json").write_text("[1, 2]")
    with pytest.raises(UserError, match="top level is not an object"):
        read_record(tmp_path)


def test_the_experiment_digest_ignores_host_and_port_only() -> None:
    flags = ["--model-path", "m", "--host", "127.0.0.1", "--port", "30001", "--tp-size", "4"]
    same = ["--model-path", "m", "--host=::1", "--port=40000", "--tp-size", "4"]
    workload = {"requests": 4}
    assert experiment_digest(flags, workload) == experiment_digest(same, workload)
    assert experiment_digest(flags, workload) != experiment_digest([*flags[:-1], "2"], workload)
    assert experiment_digest(flags, workload) != experiment_digest(flags, {"requests": 5})
