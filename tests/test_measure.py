"""Raw records, typed failures, SGLang's exact stream shapes, derived metrics that recompute from the file,
manifests, and the client's account of itself."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest

from harness.measure.client_side import (
    ACCEPT_LENGTH_TOLERANCE,
    derive_metrics,
    failure_kinds,
    not_comparable,
)
from harness.records.manifest import Manifest, PromptLengths, build_manifest, manifest_mismatch
from harness.records.request_log import ErrorKind, RequestRecord, read_manifest, read_requests_jsonl
from harness.workload.driver import run_workload_sync
from harness.workload.prompts import random_id_prompts
from tests.peers.replay import ReplayServer, Script, sse
from tests.peers.sglang_peer import PeerConfig, PeerServer

BASE: dict[str, object] = {
    "concurrency": 2, "request_rate": None, "max_new_tokens": 10, "ignore_eos": True, "temperature": 0.0,
    "stream": True, "warmup": 0, "request_timeout_s": 10.0, "jsonl_path": None, "progress": False,
}
MS = 1_000_000


def run(base_url: str, n: int = 2, **overrides: object):
    return run_workload_sync(base_url, random_id_prompts([5] * n, seed=0), **{**BASE, **overrides})


def chunk(text: str, ids: list[int], tokens: int, finish: object = None, **meta: object) -> bytes:
    """A /generate stream chunk as SGLang 0.5.15 serialises it (orjson: compact, keys in insertion order;
    meta_info built in srt/managers/tokenizer_manager.py `_handle_batch_output`, 0.5.15:1889-1920)."""
    info = {"id": "9f1c", "finish_reason": finish, "prompt_tokens": 5, "weight_version": "default",
            "num_retractions": 0, "reasoning_tokens": 0, "completion_tokens": tokens, "cached_tokens": 0, **meta}
    return sse(json.dumps({"text": text, "output_ids": ids, "meta_info": info}, separators=(",", ":")).encode())


# --- SGLang 0.5.15's abort shapes: a failed request, never a success ----------------------------------------

# `_handle_abort_req` (0.5.15:2695-2750): finish_reason {"type": "abort", "message": ...}, meta_info of
# id, finish_reason, weight_version, e2e_latency, completion_tokens; a stream gets only the last output id.
ABORT_WAITING = sse(json.dumps({"text": " Paris is", "output_ids": [7], "meta_info": {
    "id": "9f1c", "finish_reason": {"type": "abort", "message": "Abort in waiting queue"},
    "weight_version": "default", "e2e_latency": 0.0123, "completion_tokens": 2}}, separators=(",", ":")).encode())
# A scheduler abort (FINISH_ABORT.to_json, srt/managers/schedule_batch.py 0.5.15:209-215) with a status code:
# `_handle_abort_finish_reason` yields it to a stream, then http_server writes `data: [DONE]`.
ABORT_503 = chunk(" Paris is", [3, 7], 2, finish={"type": "abort", "message": "The server is overloaded",
                                                 "status_code": 503, "err_type": None})
DONE = b"data: [DONE]\n\n"


@pytest.mark.parametrize("final", [ABORT_WAITING, ABORT_503], ids=["abort-waiting-queue", "abort-503"])
def test_sglang_abort_stream_is_a_failed_request(final: bytes) -> None:
    script = Script([(0.0, chunk(" Paris", [3], 1)), (0.01, final), (0.0, DONE)])
    with ReplayServer(script) as srv:
        result = run(srv.base_url, n=3)
    for r in result.records:
        assert r.status == 200 and r.done_ns is not None  # HTTP 200 and [DONE]: only the finish reason tells
        assert not r.ok and r.error_kind is ErrorKind.ABORT
        assert r.finish_reason is not None and r.finish_reason["type"] == "abort"
        assert "server aborted the request" in (r.error or "")
    m = derive_metrics(result.records, result.trace, result.manifest)
    assert m["requests_ok"] == 0 and m["requests_failed"] == 3 and m["requests_failed_abort"] == 3
    assert m["completion_tokens"] == 0 and m["output_throughput_tok_s"] == 0.0
    assert failure_kinds(result.records) == {ErrorKind.ABORT: 3}


def test_non_streamed_abort_with_http_200_is_a_failed_request() -> None:
    # Without a status code `_handle_abort_finish_reason` returns None and the body is the plain output.
    body = json.dumps({"text": " Paris", "output_ids": [3], "meta_info": {
        "id": "9f1c", "finish_reason": {"type": "abort", "message": "Abort in waiting queue"},
        "weight_version": "default", "e2e_latency": 0.01, "completion_tokens": 1}}).encode()
    with ReplayServer(Script([(0.01, body)], content_type="application/json", whole_body=True)) as srv:
        result = run(srv.base_url, n=1, stream=False)
    r = result.records[0]
    assert r.status == 200 and not r.ok and r.error_kind is ErrorKind.ABORT


def test_normal_finish_reasons_are_ok() -> None:
    for finish in ({"type": "length", "length": 2}, {"type": "stop", "matched": 2}):
        script = Script([(0.0, chunk(" a", [3], 1)), (0.0, chunk(" a b", [3, 4], 2, finish=finish)), (0.0, DONE)])
        with ReplayServer(script) as srv:
            r = run(srv.base_url, n=1).records[0]
        assert r.ok and r.error_kind is None and r.finish_reason == finish and r.completion_tokens == 2


def test_in_stream_error_event_is_a_server_error() -> None:
    # http_server.py generate_request (0.5.15:810-820): a ValueError becomes {"error": {...}}, then [DONE].
    err = sse(b'{"error":{"message":"bad input","type":"invalid_request_error","code":400,"retryable":false}}')
    with ReplayServer(Script([(0.0, chunk(" a", [3], 1)), (0.0, err), (0.0, DONE)])) as srv:
        r = run(srv.base_url, n=1).records[0]
    assert not r.ok and r.error_kind is ErrorKind.SERVER_ERROR and "bad input" in (r.error or "")
    assert r.completion_tokens == 1  # the error event adds no tokens


def test_http_error_is_typed() -> None:
    with ReplayServer(Script([(0.0, b"overloaded")], status=503, content_type="text/plain")) as srv:
        r = run(srv.base_url, n=1).records[0]
    assert not r.ok and r.error_kind is ErrorKind.HTTP and r.status == 503 and r.headers_ns is not None


def test_timeout_is_typed_not_worded() -> None:
    with ReplayServer(Script([(0.0, chunk(" a", [3], 1)), (5.0, DONE)])) as srv:
        result = run(srv.base_url, n=1, request_timeout_s=0.3)
    r = result.records[0]
    assert r.error_kind is ErrorKind.TIMEOUT and r.chunks and r.chunks[0][1] == 1
    assert 0.3 <= r.e2e_s < 1.5


# --- several tokens per chunk: per-token ITL from the server's counts ------------------------------------------


def test_several_tokens_per_chunk_itl_and_acceptance_cross_check() -> None:
    # Prefill token alone, then 3 verify steps of 3 tokens 40 ms apart; spec_verify_ct = 3 (SGLang's AL = 10/3).
    steps = [(0.0, chunk(" t", [1], 1))]
    for n in (4, 7, 10):
        finish = {"type": "length", "length": 10} if n == 10 else None
        extra = {"spec_verify_ct": 3, "spec_accept_length": 10 / 3} if n == 10 else {}
        steps.append((0.04, chunk(" t" * n, list(range(n)), n, finish=finish, **extra)))
    steps.append((0.0, DONE))
    with ReplayServer(Script(steps)) as srv:
        result = run(srv.base_url, n=2)
        writes = srv.stats.writes
    for r, w in zip(result.records, writes, strict=True):
        assert r.ok and [n for _, n in r.content_chunks] == [1, 3, 3, 3]
        assert len(r.itl_s) == 9  # one sample per token after the first event
        # Each event's gap is shared by its 3 tokens: samples come in equal triples summing to the gap.
        for k, gap in enumerate(r.chunk_gaps_s):
            assert r.itl_s[3 * k:3 * k + 3] == pytest.approx([gap / 3] * 3)
        # The client's gaps track the server's own write gaps (40 ms each) within a loose bound.
        server_gaps = [b - a for a, b in itertools.pairwise(w[:4])]  # the 4 events, not [DONE]
        for mine, theirs in zip(r.chunk_gaps_s, server_gaps, strict=True):
            assert abs(mine - theirs) < 0.015
        assert r.tpot_s == pytest.approx(sum(r.chunk_gaps_s) / 9)
    m = derive_metrics(result.records, result.trace, result.manifest)
    assert m["tokens_per_chunk_mean"] == pytest.approx(3.0)
    assert m["accept_length"] == pytest.approx(10 / 3)
    assert m["accept_length_chunks"] == pytest.approx(10 / 3)  # one event per verify step: they agree
    assert m["accept_length_chunks_disagree"] == 0.0
    itl, chunk_latency = m["itl_ms_p50"], m["chunk_latency_ms_p50"]
    assert itl is not None and chunk_latency is not None and 8 < itl < 20 and 30 < chunk_latency < 55


def test_coalesced_chunks_make_acceptance_and_chunks_disagree() -> None:
    # The server says 4 verify steps (AL 2.5) but the stream delivered them as 2 events of 4 and 5 tokens.
    steps = [(0.0, chunk(" t", [1], 1)), (0.01, chunk(" t" * 5, [1] * 5, 5)),
             (0.01, chunk(" t" * 10, [1] * 10, 10, finish={"type": "length"}, spec_verify_ct=4)), (0.0, DONE)]
    with ReplayServer(Script(steps)) as srv:
        result = run(srv.base_url, n=1)
    m = derive_metrics(result.records, result.trace, result.manifest)
    assert m["accept_length"] == pytest.approx(2.5) and m["accept_length_chunks"] == pytest.approx(5.0)
    assert m["accept_length_chunks_rel_diff"] == pytest.approx(1.0) and ACCEPT_LENGTH_TOLERANCE < 1.0
    assert m["accept_length_chunks_disagree"] == 1.0


# --- recompute exactly from requests.jsonl ----------------------------------------------------------------------


def test_metrics_recompute_exactly_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    with PeerServer(PeerConfig(first_delay_s=0.01, step_s=0.005, tokens_per_event=3, stall_prompt_tokens=7)) as peer:
        prompts = random_id_prompts([5, 6, 7, 5, 6, 5], seed=3)
        result = run_workload_sync(peer.base_url, prompts, **{**BASE, "warmup": 1, "concurrency": 3,
                                                               "request_timeout_s": 0.5, "jsonl_path": path})
    live = derive_metrics(result.records, result.trace, result.manifest)
    loaded = read_requests_jsonl(path)
    assert read_manifest(tmp_path) == result.manifest and read_manifest(tmp_path / "nope") is None
    assert loaded.records == result.records and loaded.trace == result.trace and loaded.manifest == result.manifest
    again = derive_metrics(loaded.records, loaded.trace, loaded.manifest)
    assert json.dumps(again, sort_keys=True) == json.dumps(live, sort_keys=True)  # exact, NaN-free, None kept
    assert live["requests_ok"] == 4 and live["requests_failed_timeout"] == 1
    assert live["output_throughput_tok_s"] and live["loop_lag_ms_p50"] is not None


def test_partial_last_line_of_a_killed_run_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    with PeerServer() as peer:
        run(peer.base_url, n=3, jsonl_path=path)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:3]) + "\n" + lines[3][:40])  # header, 2 requests, a cut third one
    loaded = read_requests_jsonl(path)
    assert len(loaded.records) == 2 and loaded.trace is None and loaded.manifest is not None


# --- windows --------------------------------------------------------------------------------------------------


def _rec(i: int, sent_ms: int, token_ms: list[int], *, per: int = 2) -> RequestRecord:
    chunks = tuple((t * MS, per * (k + 1)) for k, t in enumerate(token_ms))
    last = token_ms[-1] * MS
    return RequestRecord(index=i, warmup=False, prompt_tokens=4, stream=True, ok=True, status=200, error_kind=None,
                         error=None, due_ns=sent_ms * MS, sent_ns=sent_ms * MS, written_ns=None,
                         headers_ns=sent_ms * MS,
                         chunks=chunks, done_ns=last, closed_ns=last + 5 * MS, finish_reason={"type": "length"},
                         completion_tokens=per * len(token_ms), meta_info={}, text="", started_at=0.0)


def _manifest(loop: str, concurrency: int, n: int) -> Manifest:
    return build_manifest(prompt_tokens=[4] * n, prompt_digest="x", warmup=0, concurrency=concurrency,
                          request_rate=None if loop == "closed" else 5.0, max_new_tokens=4, temperature=0.0,
                          ignore_eos=True, stream=True)


def test_full_window_is_first_send_to_last_token_and_steady_window_drops_ramp_and_drain() -> None:
    # Closed loop of 2: requests sent at 0, 10, 100, 200 ms; each gets 2 tokens at +50 and 2 at +100 ms.
    records = [_rec(i, s, [s + 50, s + 100]) for i, s in enumerate((0, 10, 100, 200))]
    m = derive_metrics(records, None, _manifest("closed", 2, 4))
    assert m["window_s"] == pytest.approx(0.300)  # 0 -> 300 ms (the last token), not the stream close (305)
    assert m["output_throughput_tok_s"] == pytest.approx(16 / 0.3)
    # Steady: from the 2nd send (10 ms, both slots busy) to the last send (200 ms).
    assert m["steady_window_s"] == pytest.approx(0.190)
    # Tokens arriving in [10, 200] ms: 50, 60, 100, 110, 150, 200 -> 6 events of 2 tokens.
    assert m["output_throughput_tok_s_steady"] == pytest.approx(12 / 0.19)
    # Open loop: the ramp is the first 10% of the sends (here the 1st), so the window starts at 0.
    mo = derive_metrics(records, None, _manifest("open", 2, 4))
    assert mo["steady_window_s"] == pytest.approx(0.2)
    # Everything sent at once: no steady window.
    together = [_rec(i, 0, [50, 100]) for i in range(3)]
    assert derive_metrics(together, None, _manifest("closed", 4, 3))["steady_window_s"] is None


# --- the client's account of itself -----------------------------------------------------------------------------


def test_client_health_is_recorded_and_a_blocked_loop_is_flagged() -> None:
    with PeerServer(PeerConfig(first_delay_s=0.002, step_s=0.002)) as peer:
        calm = run(peer.base_url, n=8, request_rate=200.0, concurrency=8)

        def hog() -> None:  # blocks the event loop 30 ms at every poll, as a slow client would
            time.sleep(0.03)

        slow = run(peer.base_url, n=8, request_rate=200.0, concurrency=8, should_abort=lambda: hog())
    mc = derive_metrics(calm.records, calm.trace, calm.manifest)
    ms = derive_metrics(slow.records, slow.trace, slow.manifest)
    assert mc["requested_rate_rps"] == 200.0 and mc["requested_concurrency"] == 8
    assert mc["achieved_rate_rps"] is not None and mc["client_cpu_fraction"] is not None
    assert 1 <= (mc["concurrency_max"] or 0) <= 8
    assert ms["client_fell_behind"] == 1.0 and (ms["sched_delay_ms_p99"] or 0) > 10
    assert "the client fell behind" in (not_comparable(ms) or "")
    assert not_comparable({"client_fell_behind": 0.0}) is None
    # The calm client sent on time; the blocked one was late by about a blocked tick at the median.
    assert (mc["sched_delay_ms_p50"] or 0) < (ms["sched_delay_ms_p50"] or 0)


# --- manifests ---------------------------------------------------------------------------------------------------


def test_manifest_mismatch_names_the_field() -> None:
    a = _manifest("closed", 4, 8)
    assert manifest_mismatch(a, a) is None
    assert manifest_mismatch(a, Manifest.from_dict(a.to_dict())) is None
    b = Manifest.from_dict({**a.to_dict(), "ignore_eos": False})
    assert manifest_mismatch(a, b) == "workload manifests differ in ignore_eos: true vs false"
    c = _manifest("open", 4, 8)
    assert (manifest_mismatch(a, c) or "").startswith("workload manifests differ in loop")
    d = Manifest.from_dict({**a.to_dict(), "prompt_lengths": PromptLengths.of([4] * 7 + [5]).__dict__})
    assert "prompt_lengths" in (manifest_mismatch(a, d) or "")
    # Informational only: the prompt content digest.
    assert manifest_mismatch(a, Manifest.from_dict({**a.to_dict(), "prompts_sha256": "other"})) is None
    assert manifest_mismatch(a, None) is None


# --- acceptance length: a check names the figure it bounds ------------------------------------------------------


def test_accept_length_check_bounds_the_named_source() -> None:
    from harness.measure.client_side import ACCEPT_LENGTH_SOURCES
    from harness.pipeline import evaluate_checks
    from harness.scenario.model import ACCEPT_LENGTH_METRICS, Checks

    def failed(check: dict) -> list[str]:
        return [c.detail for c in evaluate_checks(Checks.model_validate({"accept_length": check}), metrics)
                if not c.held]

    assert dict(ACCEPT_LENGTH_SOURCES) == ACCEPT_LENGTH_METRICS
    metrics = {"requests_ok": 1, "requests_failed": 0, "accept_length": 2.0, "accept_length_server": 1.2,
               "accept_length_gauge": None}
    assert failed({"min": 1.5}) == []
    assert failed({"min": 1.5, "source": "server"}) == ["accept length (server: accept_length_server) 1.2 < min 1.5"]
    assert failed({"min": 1.5, "source": "gauge"}) == ["accept length (gauge: accept_length_gauge) was not measured"]
    with pytest.raises(ValueError, match="source"):
        Checks.model_validate({"accept_length": {"min": 1.5, "source": "lifetime"}})
