"""The workload client's figures against the CPU reference server's own ground truth (`/sim/stats`).

The reference server counts, in its scheduler, every token it made and the span from the first counted
request's arrival to the last one's finish; it streams several tokens per event under speculative decoding.
Each test starts a fresh server, because those counters are lifetime counters.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.measure.client_side import derive_metrics
from harness.records.request_log import ErrorKind, read_requests_jsonl
from harness.workload.driver import run_workload_sync
from harness.workload.prompts import random_id_prompts
from tests.helpers import start_server, stop_server
from tests.sim.sim_helpers import SPEC_31B

pytestmark = pytest.mark.slow

ARGS = [*SPEC_31B, "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "4", "--skip-server-warmup",
        "--sim-revision", "post-fix", "--sim-seed", "0", "--context-length", "256"]


def _workload(url: str, n: int, concurrency: int, max_new_tokens: int, jsonl: Path | None = None, **kw: object):
    return run_workload_sync(
        url, random_id_prompts([32] * n, seed=1, vocab=(0, 256)), concurrency=concurrency, request_rate=None,
        max_new_tokens=max_new_tokens, ignore_eos=True, temperature=0.0, stream=True, warmup=0,
        request_timeout_s=60.0, jsonl_path=jsonl, progress=False, **kw)


@pytest.mark.parametrize(("n", "concurrency", "max_new_tokens"), [(10, 10, 32), (64, 64, 8)],
                         ids=["10-short-requests", "64-connections"])
def test_throughput_window_encloses_the_servers_served_span(tmp_path: Path, n: int, concurrency: int,
                                                                   max_new_tokens: int) -> None:
    server = start_server(ARGS, tmp_path / "server.log")
    try:
        result = _workload(server.url, n, concurrency, max_new_tokens, jsonl=tmp_path / "requests.jsonl")
        truth = json.loads(server.get("/sim/stats")[1])
    finally:
        stop_server(server)
    m = derive_metrics(result.records, result.trace, result.manifest)
    assert m["requests_ok"] == n and m["completion_tokens"] == truth["completion_tokens"] == n * max_new_tokens
    # The client's window [last byte of the first request written, last token received] encloses the server's
    # [first arrival, last finish]: never a faster figure than the server's own, and close to it. How close
    # (1% on a quiet machine) is the benchmark's to say; here a loaded CI box only adds to the gap.
    assert m["output_throughput_tok_s"] <= truth["span_throughput"] * 1.001
    assert m["output_throughput_tok_s"] == pytest.approx(truth["span_throughput"], rel=0.05)
    # Several tokens per event, counted by the server: per-token ITL has one sample per token after the first.
    assert (m["tokens_per_chunk_mean"] or 0) > 1.2
    assert all(len(r.itl_s) == max_new_tokens - r.content_chunks[0][1] for r in result.records)
    # The per-request acceptance length is the server's, and the client's events agree with it.
    assert m["accept_length"] == pytest.approx(truth["accept_length"], rel=1e-9)
    assert m["accept_length_chunks"] == pytest.approx(m["accept_length"], rel=0.05)
    assert m["accept_length_chunks_disagree"] == 0.0
    # And the same numbers again from the file alone.
    log = read_requests_jsonl(tmp_path / "requests.jsonl")
    assert derive_metrics(log.records, log.trace, log.manifest) == m


def test_reference_server_abort_is_a_failed_request(tmp_path: Path) -> None:
    # 32 prompt + 300 new tokens exceed --context-length 256: the scheduler ends the request with
    # finish_reason {"type": "abort"} on a 200 stream that still ends with `data: [DONE]`, as SGLang does.
    server = start_server(ARGS, tmp_path / "server.log")
    try:
        result = _workload(server.url, 3, 3, 300)
        fine = _workload(server.url, 2, 2, 8)
    finally:
        stop_server(server)
    for r in result.records:
        assert r.status == 200 and r.done_ns is not None
        assert not r.ok and r.error_kind is ErrorKind.ABORT, r
    m = derive_metrics(result.records, result.trace, result.manifest)
    assert m["requests_ok"] == 0 and m["requests_failed_abort"] == 3 and m["accept_length"] is None
    assert all(r.ok for r in fine.records)
