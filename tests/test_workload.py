"""The workload client against a real HTTP peer that speaks SGLang's native API."""

from __future__ import annotations

import asyncio
import json
import random
import time
from pathlib import Path
from typing import Any

import pytest

from harness.measure.server_side import aggregate
from harness.util.errors import UserError
from harness.workload.driver import ErrorKind, ids_digest, run_workload, run_workload_sync
from harness.workload.prompts import Prompt, random_id_prompts
from tests.helpers import start_server, stop_server
from tests.peers.sglang_peer import PeerConfig, PeerServer

BASE: dict[str, Any] = dict(
    concurrency=4, request_rate=None, max_new_tokens=10, ignore_eos=True, temperature=0.0, stream=True,
    warmup=0, request_timeout_s=10.0, jsonl_path=None, progress=False,
)


def run(base_url: str, prompts: list[Prompt], **overrides: object):
    return run_workload_sync(base_url, prompts, **{**BASE, **overrides})


def test_streaming_records_ttft_itl_and_acceptance() -> None:
    cfg = PeerConfig(first_delay_s=0.03, step_s=0.01, tokens_per_event=3)
    with PeerServer(cfg) as peer:
        result = run(peer.base_url, random_id_prompts([8] * 6, seed=0), warmup=1)
    assert result.aborted is None
    assert [r.index for r in result.records] == list(range(6))
    assert [r.warmup for r in result.records] == [True] + [False] * 5
    for r in result.records:
        assert r.ok and r.status == 200 and r.error is None, r
        assert r.completion_tokens == 10 and r.prompt_tokens == 8
        assert r.ttft_s is not None and r.ttft_s >= 0.03
        # Events carry 1, 3, 3, 3 tokens: the first is TTFT, the other 9 tokens get one ITL sample each.
        assert len(r.itl_s) == 9
        # Per-sample gaps may shrink when two events arrive in one read; only server-side bounds are firm:
        # the last token left the peer at least first_delay + 3 steps after the request came in.
        assert all(x >= 0 for x in r.itl_s)
        assert r.e2e_s is not None and r.e2e_s >= 0.03 + 3 * 0.01
        assert r.e2e_s >= r.ttft_s + sum(r.itl_s) - 1e-6
        assert r.text.startswith(" t") and r.meta_info["spec_verify_ct"] == 3
    m = aggregate(result.records, result.measured_wall_s)
    assert m["accept_length"] == pytest.approx(10 / 3)
    assert m["requests_ok"] == 5 and m["completion_tokens"] == 50
    itl = m["itl_ms_p50"]
    assert itl is not None and 0.5 < itl < 30  # about 10 ms / 3 tokens per event


def test_concurrency_is_bounded_and_used() -> None:
    with PeerServer(PeerConfig(first_delay_s=0.02, step_s=0.01)) as peer:
        result = run(peer.base_url, random_id_prompts([4] * 12, seed=1), concurrency=3)
        assert peer.stats.max_inflight == 3
        assert len(peer.stats.bodies) == 12
    assert all(r.ok for r in result.records)


def test_warmup_runs_first_and_is_excluded_from_wall_time() -> None:
    with PeerServer(PeerConfig(first_delay_s=0.5, step_s=0.001)) as peer:
        prompts = random_id_prompts([4] * 3, seed=2)
        result = run(peer.base_url, prompts, warmup=2, concurrency=1)
        # Sent in order, warmup first (concurrency 1 makes the order observable).
        assert [b["input_ids"] for b in peer.stats.bodies] == [list(p.input_ids or ()) for p in prompts]
    assert [r.warmup for r in result.records] == [True, True, False]
    # Only the last request (~0.5 s) is measured, not the two warmups before it (with one it would be >= 1 s);
    # the half-second margin is for a loaded machine.
    assert 0.5 <= result.measured_wall_s < 1.0
    assert aggregate(result.records, result.measured_wall_s)["requests_ok"] == 1


@pytest.mark.parametrize("seed", [0, 5])
def test_poisson_request_rate_spreads_arrivals(seed: int) -> None:
    rate, n = 25.0, 12
    rng = random.Random(seed)
    expected_span = sum(rng.expovariate(rate) for _ in range(n - 1))
    with PeerServer(PeerConfig(first_delay_s=0.001, step_s=0.001)) as peer:
        before = time.monotonic()
        run(peer.base_url, random_id_prompts([4] * n, seed=0), request_rate=rate, concurrency=n, seed=seed)
        arrivals = peer.stats.arrivals
    # The schedule is open-loop from the phase's start, so no request is sent before its planned offset: the
    # last one arrives no sooner than the whole planned span after the call. Measured from the first arrival
    # instead, a first request held up on a loaded machine (its connection set up late) would shorten the span.
    assert max(arrivals) - before >= expected_span
    assert max(arrivals) - min(arrivals) <= expected_span + 0.25


def test_infinite_rate_sends_at_once() -> None:
    with PeerServer(PeerConfig(first_delay_s=0.1, step_s=0.001)) as peer:
        run(peer.base_url, random_id_prompts([4] * 8, seed=0), request_rate=float("inf"), concurrency=8)
        arrivals = peer.stats.arrivals
        assert peer.stats.max_inflight == 8
    # Sent one after another they would span >= 0.7 s (7 first-token delays); the rest is a loaded machine's slack.
    assert arrivals[-1] - arrivals[0] < 0.3


def test_stalled_request_times_out_alone() -> None:
    with PeerServer(PeerConfig(stall_prompt_tokens=7)) as peer:
        t0 = time.monotonic()
        result = run(peer.base_url, random_id_prompts([5, 7, 5], seed=0), request_timeout_s=0.4)
        took = time.monotonic() - t0
    assert took < 5.0  # the stalled request never answers: without its own timeout the run would not end
    ok = [r.ok for r in result.records]
    assert ok == [True, False, True]
    stalled = result.records[1]
    assert stalled.error_kind is ErrorKind.TIMEOUT and "timed out after 0.4 s" in (stalled.error or "")
    assert 0.4 <= (stalled.e2e_s or 0) < 1.0
    assert aggregate(result.records, result.measured_wall_s)["requests_failed"] == 1


def test_should_abort_cancels_in_flight_requests_within_a_second(tmp_path: Path) -> None:
    flagged: list[float] = []

    def should_abort() -> str | None:
        if flagged or time.monotonic() - start > 0.3:
            if not flagged:
                flagged.append(time.monotonic())
            return "server process exited with code -9"
        return None

    with PeerServer(PeerConfig(step_s=0.05)) as peer:  # 200 tokens / 3 per 50 ms: several seconds each
        start = time.monotonic()
        result = run(
            peer.base_url, random_id_prompts([4] * 10, seed=0), concurrency=4, max_new_tokens=200,
            should_abort=should_abort, jsonl_path=tmp_path / "requests.jsonl",
        )
        done = time.monotonic()
    assert flagged and done - flagged[0] < 1.0
    assert result.aborted == "server process exited with code -9"
    assert len(result.records) == 4  # the in-flight ones; the other 6 were never sent
    for r in result.records:
        assert not r.ok and r.error == "aborted: server process exited with code -9"
        assert r.error_kind is ErrorKind.CANCELLED
        assert 0 < r.completion_tokens < 200  # partial progress survives the cancellation
    lines = [json.loads(x) for x in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert [x["kind"] for x in lines] == ["workload"] + ["request"] * 4 + ["client"]
    assert all(x["error"].startswith("aborted") and x["error_kind"] == "cancelled" for x in lines[1:-1])
    assert lines[-1]["aborted"] == "server process exited with code -9"


def test_abort_during_rate_wait_stops_promptly() -> None:
    with PeerServer() as peer:
        start = time.monotonic()
        result = run(
            peer.base_url, random_id_prompts([4] * 5, seed=0), request_rate=0.1,
            should_abort=lambda: "stop" if time.monotonic() - start > 0.2 else None,
        )
    assert time.monotonic() - start < 1.5
    assert result.aborted == "stop" and len(result.records) == 1 and result.records[0].ok


def test_jsonl_summarises_ids_and_keeps_failed_requests_in_full(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "requests.jsonl"
    prompts = random_id_prompts([5, 7, 6], seed=9)
    with PeerServer(PeerConfig(stall_prompt_tokens=7)) as peer:
        result = run(peer.base_url, prompts, warmup=1, request_timeout_s=0.3, jsonl_path=path)
    lines = [x for x in map(json.loads, path.read_text().splitlines()) if x["kind"] == "request"]
    assert sorted(x["index"] for x in lines) == [0, 1, 2]
    by_index = {x["index"]: x for x in lines}
    ok_line = by_index[2]
    assert "input_ids" not in ok_line["request"]
    assert ok_line["request"]["input_ids_len"] == 6
    assert ok_line["request"]["input_ids_sha256"] == ids_digest(prompts[2].input_ids or ())
    assert ok_line["request"]["sampling_params"] == {"max_new_tokens": 10, "temperature": 0.0, "ignore_eos": True}
    assert ok_line["request"]["stream"] is True
    assert ok_line["ok"] and ok_line["completion_tokens"] == 10 and ok_line["meta_info"]["completion_tokens"] == 10
    assert [n for _, n in ok_line["chunks"]] == [1, 4, 7, 10] and ok_line["text"] == result.records[2].text
    assert by_index[0]["warmup"] is True
    failed = by_index[1]
    assert failed["ok"] is False and failed["error_kind"] == "timeout" and "timed out" in failed["error"]
    assert failed["request"]["input_ids"] == list(prompts[1].input_ids or ())


def test_jsonl_full_ids_flag(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    prompts = random_id_prompts([5], seed=9)
    with PeerServer() as peer:
        run(peer.base_url, prompts, jsonl_path=path, jsonl_full_ids=True)
    line = json.loads(path.read_text().splitlines()[1])
    assert line["request"]["input_ids"] == list(prompts[0].input_ids or ())


def test_non_streaming() -> None:
    with PeerServer(PeerConfig(first_delay_s=0.05)) as peer:
        result = run(peer.base_url, random_id_prompts([4, 4], seed=0), stream=False)
        assert all(b["stream"] is False for b in peer.stats.bodies)
    for r in result.records:
        assert r.ok and r.ttft_s is None and r.itl_s == () and r.completion_tokens == 10
        assert r.e2e_s is not None and r.e2e_s >= 0.05
    m = aggregate(result.records, result.measured_wall_s)
    assert m["ttft_ms_p50"] is None and m["accept_length"] == pytest.approx(10 / 3)


def test_legacy_meta_info_keys_still_give_acceptance() -> None:
    with PeerServer(PeerConfig(legacy_keys=True, tokens_per_event=4)) as peer:
        result = run(peer.base_url, random_id_prompts([4] * 3, seed=0), max_new_tokens=13)
    assert all("spec_accept_length" not in r.meta_info for r in result.records)
    assert aggregate(result.records, result.measured_wall_s)["accept_length"] == pytest.approx(13 / 3)


def test_text_prompt_is_sent_as_text() -> None:
    with PeerServer() as peer:
        result = run(peer.base_url, [Prompt(input_ids=None, text="a b c", tokens=3)])
        assert peer.stats.bodies[0]["text"] == "a b c" and "input_ids" not in peer.stats.bodies[0]
    assert result.records[0].ok


def test_stream_cut_before_done_is_a_failure() -> None:
    with PeerServer(PeerConfig(truncate_stream=True)) as peer:
        result = run(peer.base_url, random_id_prompts([4], seed=0))
    r = result.records[0]
    assert not r.ok and r.error_kind is ErrorKind.STREAM and "before 'data: [DONE]'" in (r.error or "")
    assert r.completion_tokens == 10


def test_connection_refused_is_recorded_not_raised() -> None:
    with PeerServer() as peer:
        url = peer.base_url
    t0 = time.monotonic()
    result = run(url, random_id_prompts([4] * 3, seed=0))
    assert time.monotonic() - t0 < 5
    assert [r.ok for r in result.records] == [False] * 3
    assert all(r.error_kind is ErrorKind.CONNECTION and r.headers_ns is None for r in result.records)


def test_progress_bar_draws_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    with PeerServer() as peer:
        run(peer.base_url, random_id_prompts([4] * 3, seed=0), progress=True)
    err = capsys.readouterr().err
    assert "3/3 failed 0" in err and err.endswith("\n")


def test_no_progress_bar_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    with PeerServer() as peer:
        run(peer.base_url, random_id_prompts([4], seed=0), progress=None)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"request_rate": 0.0}, "request_rate"),
        ({"warmup": 2}, "none left to measure"),
        ({"request_timeout_s": 0}, "request_timeout_s"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
    ],
)
def test_bad_workload_settings_are_user_errors(overrides: dict, match: str) -> None:
    with pytest.raises(UserError, match=match):
        run("http://127.0.0.1:9", random_id_prompts([4, 4], seed=0), **overrides)


def test_runs_inside_an_existing_event_loop() -> None:
    async def main() -> int:
        with PeerServer() as peer:
            result = await run_workload(peer.base_url, random_id_prompts([4], seed=0), **BASE)
        return len(result.records)

    assert asyncio.run(main()) == 1


def test_a_failing_should_abort_propagates_and_cancels_requests() -> None:
    def broken() -> str | None:
        raise RuntimeError("watcher bug")

    with PeerServer(PeerConfig(step_s=0.05)) as peer:
        t0 = time.monotonic()
        with pytest.raises(RuntimeError, match="watcher bug"):
            run(peer.base_url, random_id_prompts([4] * 4, seed=0), max_new_tokens=200, should_abort=broken)
        assert time.monotonic() - t0 < 1.5


# --- against the CPU reference server (a real process) ---------------------------------------------------------

def _get_json(url: str) -> dict:
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as resp:
        return json.loads(resp.read())


@pytest.mark.slow
def test_against_the_cpu_reference_server(tmp_path: Path) -> None:
    from harness.measure.server_side import metric_value, scrape_metrics, server_accept_length

    server = start_server([
        "--model-path", "google/gemma-4-E4B-it", "--speculative-algorithm", "NEXTN",
        "--speculative-draft-model-path", "google/gemma-4-E4B-it-assistant",
        "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
        "--skip-server-warmup", "--enable-metrics", "--sim-revision", "post-fix", "--sim-seed", "0",
        "--sim-draft-agreement", "0.6",
    ], tmp_path / "server.log", timeout=90)
    try:
        base = server.url
        result = run(
            base, random_id_prompts([12, 20, 33, 16, 25, 9], seed=4, vocab=(0, 256)), concurrency=3,
            max_new_tokens=24, warmup=0, request_timeout_s=60, jsonl_path=tmp_path / "requests.jsonl",
            should_abort=lambda: None if server.poll() is None else f"server exited {server.poll()}",
        )
        assert result.aborted is None
        assert all(r.ok for r in result.records), [r.error for r in result.records]
        assert all(r.completion_tokens == 24 and r.ttft_s is not None for r in result.records)
        m = aggregate(result.records, result.measured_wall_s)
        truth = _get_json(base + "/sim/stats")
        # Ground truth from the server's own counters over exactly the requests we sent.
        assert m["completion_tokens"] == truth["completion_tokens"]
        assert m["spec_verify_ct"] == truth["verify_steps"]
        assert m["accept_length"] == pytest.approx(truth["accept_length"], rel=1e-6)
        accept = m["accept_length"]
        assert accept is not None and 1.0 <= accept < 4.0  # a draft that agrees 60% of the time: some drafts rejected
        assert metric_value(scrape_metrics(base), "sglang:spec_accept_length") is not None
        server_side = server_accept_length(base)
        if server_side is not None:
            # SGLang's own figure folds its per-batch counts every decode_log_interval batches (0.5.14
            # metrics_reporter.py :674, :723-724): a window of decode batches, not the requests' truth, so it
            # is checked against what the server's reporter folded, as /server_info reads it.
            assert server_side == pytest.approx(truth["server_accept_length"], rel=1e-9)
            assert 1.0 <= server_side < 4.0
        assert len((tmp_path / "requests.jsonl").read_text().splitlines()) == 1 + 6 + 1
    finally:
        stop_server(server)
