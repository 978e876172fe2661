"""sglang#28264's two conditions a user can set up, end to end on the reference server at ``pre-fix``.

The scenario ``stale_out_cache_loc_busy_batch_cached_prompt.yaml`` runs as a user runs it (its phases sent
over HTTP by the harness's own client, the server a real process): a 276-token prompt that joins a busy
batch passes, and the same prompt sent after the batch emptied crashes; a prompt sent again after it was
cached passes, and a fresh one after the same first phase crashes. What the client saw is checked too: the
joining request really was sent while the busy one still ran, and the cached prompt really hit the cache.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.compare.runner import compare_cases
from harness.records.outcome import Outcome
from harness.report import render_html, render_markdown, write_reports
from harness.report.json import load_report
from harness.scenario import load_file

pytestmark = [pytest.mark.slow, pytest.mark.sim]

SCENARIO = (Path(__file__).resolve().parents[2] / "scenarios" / "frozen_kv_mtp"
            / "stale_out_cache_loc_busy_batch_cached_prompt.yaml")


def _requests(run_dir: Path, phase: str) -> list[dict]:
    """The phase's request lines, each with its send and finish times on the wall clock (s)."""
    lines = [json.loads(line) for line in (run_dir / f"requests.{phase}.jsonl").read_text().splitlines()]
    epoch = lines[0]["epoch_wall"]
    out = [line for line in lines if line.get("kind") == "request"]
    for r in out:
        r["sent_s"] = epoch + r["sent_ns"] / 1e9
        r["done_s"] = epoch + r["done_ns"] / 1e9 if r.get("done_ns") is not None else None
    return out


def test_joining_a_busy_batch_or_a_cached_prefix_keeps_the_stale_value_away(tmp_path: Path) -> None:
    loaded = load_file(SCENARIO)
    assert {c.name for c in loaded.cases} == {"condition=busy", "condition=alone", "condition=cached",
                                             "condition=uncached"}
    builds = loaded.cases[0].scenario.builds
    before, after = builds["before"].sim_spec, builds["after"].sim_spec
    assert before.startswith("sim:pre-fix") and after.startswith("sim:post-fix")
    result = compare_cases(loaded, loaded.cases, {"before": before}, out_root=tmp_path)
    runs = {r.case.name: r for r in result.runs}
    assert result.report.all_expectations_held

    assert runs["condition=busy"].outcome is Outcome.PASS, runs["condition=busy"].reason
    assert runs["condition=cached"].outcome is Outcome.PASS, runs["condition=cached"].reason
    for control in ("condition=alone", "condition=uncached"):
        record = runs[control]
        assert record.outcome is Outcome.CRASH and record.signature == "frozen-kv-mtp-stale-out-cache-loc", record.reason
        assert record.phase == "workload"
        log = Path(record.server.log).read_text()
        assert "output with shape [1] doesn't match the broadcast shape [276]" in log

    # busy: join was sent after hold's first token and before hold ended; alone: after hold ended.
    for name, overlapped in (("condition=busy", True), ("condition=alone", False)):
        run_dir = Path(runs[name].artifacts)
        (hold,), (join,) = _requests(run_dir, "hold"), _requests(run_dir, "join")
        first_token_s = hold["sent_s"] + (hold["chunks"][0][0] - hold["sent_ns"]) / 1e9
        assert join["sent_s"] >= first_token_s
        assert (join["sent_s"] < hold["done_s"]) is overlapped, (name, join["sent_s"], hold["done_s"])
        if overlapped:
            assert join["ok"] and hold["ok"] and hold["completion_tokens"] == 96  # the reference: block's hold

    # Both: the first phase's prompt finished in its prefill (one token), so it never reached the draft.
    # cached: the second send extends one token, the rest is the cached prefix; uncached: it died with the server.
    for name in ("condition=cached", "condition=uncached"):
        (first,) = _requests(Path(runs[name].artifacts), "cache")
        assert first["ok"] and first["completion_tokens"] == 1 and first["meta_info"]["cached_tokens"] == 0
    (again,) = _requests(Path(runs["condition=cached"].artifacts), "again")
    assert again["ok"] and again["meta_info"]["cached_tokens"] == 275
    (fresh,) = _requests(Path(runs["condition=uncached"].artifacts), "again")
    assert not fresh["ok"]

    # Every run (the crashed ones reached ready) says which attention backend the server resolved: no flag, so
    # Gemma-4's default off SM100, triton, as /server_info reports it; in result.json and in the reports.
    for record in runs.values():
        server = json.loads((Path(record.artifacts) / "result.json").read_text())["server"]
        assert (server["attention_backend"], server["draft_attention_backend"], server["attention_backend_source"]) \
            == ("triton", "triton", "server_info"), record.case.name
    assert {role.attention_backend for case in result.report.cases for role in case.roles} == {"triton"}
    assert "attention backend `triton`" in render_markdown(result.report)
    assert "attention backend <code>triton</code>" in render_html(result.report)
    written = write_reports(result.report, tmp_path / "report")
    report_json = json.loads(Path(written["json"]).read_text())
    assert report_json["cases"][0]["roles"][0]["attention_backend"] == "triton"
    assert load_report(Path(written["json"])).cases[0].roles[0].attention_backend == "triton"  # read back

    # After the fix the two controls pass as well: what crashed them was the stale value, not the traffic.
    controls = [c for c in loaded.cases if c.name in ("condition=alone", "condition=uncached")]
    fixed = compare_cases(loaded, controls, {"after": after}, out_root=tmp_path / "after")
    assert [r.outcome for r in fixed.runs] == [Outcome.PASS, Outcome.PASS], [r.reason for r in fixed.runs]
    assert fixed.report.all_expectations_held
