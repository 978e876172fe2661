"""Metrics: token-weighted acceptance, percentiles, server info, Prometheus parsing."""

from __future__ import annotations

import math

import pytest

from harness.measure.server_side import (
    AGGREGATE_KEYS,
    aggregate,
    metric_value,
    parse_prometheus,
    percentile,
    request_accept_length,
    scrape_metrics,
    server_accept_length,
)
from harness.records.request_log import ErrorKind, RequestRecord
from tests.peers.sglang_peer import PeerConfig, PeerServer

MS = 1_000_000


def rec(index: int, tokens: int, meta: dict, *, ok: bool = True, warmup: bool = False,
        ttft_ms: int = 100, gaps_ms: tuple[int, ...] = (), e2e_ms: int = 1000) -> RequestRecord:
    """A record sent at 0 whose first event (1 token) arrives after ttft_ms, then one event per gap carrying
    an even share of the remaining tokens, the last one with all of them."""
    chunks = [(ttft_ms * MS, 1 if gaps_ms else tokens)]
    t = ttft_ms
    for k, gap in enumerate(gaps_ms, 1):
        t += gap
        chunks.append((t * MS, 1 + (tokens - 1) * k // len(gaps_ms)))
    return RequestRecord(
        index=index, warmup=warmup, prompt_tokens=10, stream=True, ok=ok, status=200 if ok else 500,
        error_kind=None if ok else ErrorKind.HTTP, error=None if ok else "boom", due_ns=0, sent_ns=0,
        written_ns=None, headers_ns=MS, chunks=tuple(chunks), done_ns=e2e_ms * MS, closed_ns=e2e_ms * MS,
        finish_reason={"type": "length"}, completion_tokens=tokens, meta_info={"completion_tokens": tokens, **meta},
        text="", started_at=0.0,
    )


def test_request_accept_length_current_and_old_keys() -> None:
    assert request_accept_length({"completion_tokens": 30, "spec_verify_ct": 10, "spec_accept_length": 3.0}) == 3.0
    # Older releases: no spec_accept_length, other draft-count names; derive from verify count.
    old = {"completion_tokens": 40, "spec_verify_ct": 16, "spec_accept_token_num": 24, "spec_draft_token_num": 48}
    assert request_accept_length(old) == pytest.approx(2.5)
    assert request_accept_length({"completion_tokens": 40}) is None
    assert request_accept_length({"completion_tokens": 40, "spec_verify_ct": 0}) is None
    assert request_accept_length({"spec_accept_length": float("nan")}) is None


def test_accept_length_is_token_weighted_and_ignores_warmup_and_failures() -> None:
    records = [
        rec(0, 1000, {"spec_verify_ct": 1000}, warmup=True),  # warmup: excluded
        rec(1, 100, {"spec_verify_ct": 25}, e2e_ms=2000),  # 4.0
        rec(2, 10, {"spec_verify_ct": 10}),  # 1.0
        rec(3, 500, {"spec_verify_ct": 1}, ok=False),  # failed: excluded
    ]
    m = aggregate(records)
    assert set(m) == set(AGGREGATE_KEYS)
    assert m["accept_length"] == pytest.approx(110 / 35)  # not the mean of ratios (2.5)
    assert m["completion_tokens"] == 110
    assert m["spec_verify_ct"] == 35
    assert m["requests_ok"] == 2 and m["requests_failed"] == 1 and m["requests_failed_http"] == 1
    # Window: first send (0) to the last token received (each record's only event, at 100 ms).
    assert m["window_s"] == pytest.approx(0.1)
    assert m["output_throughput_tok_s"] == pytest.approx(1100.0)
    assert m["request_throughput_rps"] == pytest.approx(20.0)


def test_accept_length_from_accept_key_only() -> None:
    m = aggregate([rec(0, 90, {"spec_accept_length": 3.0}), rec(1, 10, {"spec_accept_length": 1.0})])
    assert m["accept_length"] == pytest.approx(100 / 40)
    assert m["spec_verify_ct"] == 40


def test_no_spec_and_no_success_give_none() -> None:
    m = aggregate([rec(0, 10, {})])
    assert m["accept_length"] is None and m["spec_verify_ct"] is None and m["completion_tokens"] == 10
    empty = aggregate([rec(0, 10, {}, ok=False)])
    assert empty["requests_ok"] == 0 and empty["requests_failed"] == 1
    assert empty["ttft_ms_p50"] is None and empty["output_throughput_tok_s"] == 0.0


def test_latency_percentiles_in_ms() -> None:
    # Request i: TTFT (i+1)*10 ms, then 2 events (i+1) ms apart carrying 2 tokens each (5 tokens in all).
    records = [rec(i, 5, {}, ttft_ms=(i + 1) * 10, gaps_ms=(i + 1, i + 1), e2e_ms=(i + 1) * 1000) for i in range(5)]
    m = aggregate(records)
    assert m["ttft_ms_p50"] == pytest.approx(30.0)
    assert m["ttft_ms_p95"] == pytest.approx(48.0)
    assert m["itl_ms_p50"] == pytest.approx(1.5)  # 3 ms gap / 2 tokens, for the median request
    assert m["chunk_latency_ms_p50"] == pytest.approx(3.0)
    assert m["tpot_ms_p50"] == pytest.approx(6 / 4)  # (last - first token) / (5 - 1)
    assert m["tokens_per_chunk_mean"] == pytest.approx(2.0)
    assert m["e2e_ms_p50"] == pytest.approx(3000.0)
    assert m["e2e_ms_p95"] == pytest.approx(4800.0)


def test_percentile_matches_numpy() -> None:
    np = pytest.importorskip("numpy")
    xs = [5.0, 1.0, 9.0, 2.5, 7.0, 3.0]
    for q in (0, 50, 95, 99, 100):
        assert percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)))
    assert percentile([], 50) is None


EXPOSITION = r'''
# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{engine_type="unified",model_name="m",tp_rank="0"} 3.25
sglang:spec_accept_rate{model_name="m"} NaN
sglang:num_requests_total{model_name="m", path="/a\"b\\c\nd",} 12 1700000000000
sglang:token_usage +Inf
sglang:neg -Inf
process_start_time_seconds 1.7e9
sglang:e2e_request_latency_seconds_bucket{le="0.1",model_name="m"} 4
sglang:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 9
this is { not a sample
broken{label=unquoted} 1
'''


def test_parse_prometheus_labels_comments_specials() -> None:
    parsed = parse_prometheus(EXPOSITION)
    assert parsed["sglang:spec_accept_length"] == [
        ({"engine_type": "unified", "model_name": "m", "tp_rank": "0"}, 3.25)
    ]
    assert math.isnan(parsed["sglang:spec_accept_rate"][0][1])
    labels, value = parsed["sglang:num_requests_total"][0]
    assert labels == {"model_name": "m", "path": '/a"b\\c\nd'} and value == 12.0
    assert parsed["sglang:token_usage"] == [({}, math.inf)]
    assert parsed["sglang:neg"][0][1] == -math.inf
    assert parsed["process_start_time_seconds"][0][1] == 1.7e9
    assert metric_value(parsed, "sglang:e2e_request_latency_seconds_bucket", {"le": "+Inf"}) == 9
    assert "this" not in parsed and "broken" not in parsed
    assert not any(name.startswith("#") for name in parsed)
    assert metric_value(parsed, "missing") is None


def test_server_accept_length_both_endpoints_and_missing_key() -> None:
    with PeerServer(PeerConfig()) as peer:
        assert server_accept_length(peer.base_url) is None  # no draft accepted yet: key absent
        _generate_once(peer.base_url)
        value = server_accept_length(peer.base_url)
        assert value == pytest.approx(peer.stats.completion_tokens / peer.stats.verify_steps)
    with PeerServer(PeerConfig(server_info_path="/server_info")) as peer:
        _generate_once(peer.base_url)
        assert server_accept_length(peer.base_url) == pytest.approx(
            peer.stats.completion_tokens / peer.stats.verify_steps
        )
    with PeerServer(PeerConfig(server_info_path="/elsewhere")) as peer:
        assert server_accept_length(peer.base_url) is None


def test_server_accept_length_without_server_is_none() -> None:
    with PeerServer() as peer:
        url = peer.base_url
    assert server_accept_length(url, timeout_s=2) is None


def test_scrape_metrics_over_http() -> None:
    with PeerServer(PeerConfig(metrics_text=EXPOSITION)) as peer:
        parsed = scrape_metrics(peer.base_url)
    assert metric_value(parsed, "sglang:spec_accept_length") == 3.25
    with PeerServer(PeerConfig()) as peer:  # --enable-metrics off: 404
        assert scrape_metrics(peer.base_url) == {}


def _generate_once(base_url: str) -> None:
    import json
    import urllib.request

    body = json.dumps({"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 10}}).encode()
    req = urllib.request.Request(base_url + "/generate", data=body, headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(req, timeout=10) as resp:
        assert resp.status == 200


def test_server_side_reads_of_a_hung_server_are_short_bounded() -> None:
    import socket
    import time

    from harness.measure.server_side import read_server_figures

    with socket.socket() as listener:  # accepts connections (the kernel's backlog) and never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        t0 = time.monotonic()
        figures = read_server_figures(url, metrics_enabled=True, timeout_s=0.3)
        took = time.monotonic() - t0
    assert figures.accept_length_server is None and figures.accept_length_gauge is None
    assert took < 1.5  # one /server_info read and one /metrics read, each cut at 0.3 s


def test_server_figures_name_each_acceptance_length() -> None:
    from harness.measure.server_side import gauge_accept_length, read_server_figures

    two_ranks = parse_prometheus('sglang:spec_accept_length{tp_rank="1"} 2.0\n'
                                 'sglang:spec_accept_length{tp_rank="0"} 3.0\n')
    assert gauge_accept_length(two_ranks) == 3.0
    assert gauge_accept_length({}) is None
    with PeerServer(PeerConfig(server_info_path="/server_info", metrics_text=EXPOSITION)) as peer:
        _generate_once(peer.base_url)
        figures = read_server_figures(peer.base_url, metrics_enabled=True)
        expected = peer.stats.completion_tokens / peer.stats.verify_steps
    assert figures.as_metrics() == {"accept_length_server": pytest.approx(expected), "accept_length_gauge": 3.25}


def test_the_resolved_attention_backends_are_read_as_sglang_resolves_them() -> None:
    from harness.measure.server_side import attention_backends

    gemma_default = {"attention_backend": "triton", "decode_attention_backend": None,
                     "speculative_draft_attention_backend": None}
    got = attention_backends(gemma_default, speculative=True)
    assert got is not None and (got.decode, got.draft, got.source) == ("triton", "triton", "server_info")
    split = {**gemma_default, "decode_attention_backend": "trtllm_mha", "speculative_draft_attention_backend": "triton"}
    got = attention_backends(split, speculative=True)
    assert got is not None and (got.decode, got.draft) == ("trtllm_mha", "triton")
    got = attention_backends(split, speculative=False)
    assert got is not None and got.draft is None
    assert attention_backends({"attention_backend": None}, speculative=True) is None
    assert attention_backends({}, speculative=False) is None


def test_a_server_that_never_answered_is_described_by_its_flags_else_its_default_line() -> None:
    from harness.measure.server_side import attention_from_start

    flags = ["--model-path", "m", "--attention-backend", "trtllm_mha", "--speculative-draft-attention-backend=triton"]
    got = attention_from_start(flags, "", speculative=True)
    assert got is not None and (got.decode, got.draft, got.source) == ("trtllm_mha", "triton", "flags")
    log = "[2026-12-01 10:00:00] Use triton as default attention backend for Gemma4\n"
    got = attention_from_start(["--model-path", "m"], log, speculative=True)
    assert got is not None and (got.decode, got.draft, got.source) == ("triton", "triton", "log")
    assert attention_from_start(["--model-path", "m"], "no such line\n", speculative=True) is None
