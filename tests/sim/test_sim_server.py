"""Every endpoint through a real HTTP client against one real post-fix server process."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

pytestmark = pytest.mark.slow

GREEDY = {"temperature": 0, "ignore_eos": True}


def test_health_and_model_info(post_fix_graph_server):
    s = post_fix_graph_server
    assert s.get("/health")[0] == 200
    assert s.get("/health_generate")[0] == 200
    status, body = s.get("/get_model_info")
    info = json.loads(body)
    assert status == 200 and info["model_path"] == "google/gemma-4-31B-it" and info["is_generation"] is True
    status, body = s.get("/v1/models")
    assert status == 200 and json.loads(body)["data"][0]["id"] == "google/gemma-4-31B-it"


def test_generate_text_and_server_info(post_fix_graph_server):
    s = post_fix_graph_server
    status, body = s.post("/generate", {"text": "The capital of France is",
                                        "sampling_params": {"max_new_tokens": 24, **GREEDY}})
    assert status == 200, body
    out = json.loads(body)
    meta = out["meta_info"]
    assert meta["prompt_tokens"] == len(b"The capital of France is")
    assert meta["completion_tokens"] == 24 == len(out["output_ids"])
    assert meta["spec_verify_ct"] >= 1
    assert meta["spec_accept_length"] == pytest.approx(24 / meta["spec_verify_ct"])
    assert sum(meta["spec_accept_histogram"]) == meta["spec_verify_ct"]
    assert meta["finish_reason"] == {"type": "length", "length": 24} and meta["e2e_latency"] > 0
    for path in ("/get_server_info", "/server_info"):
        status, body = s.get(path)
        info = json.loads(body)
        assert status == 200
        assert info["speculative_num_steps"] == 5 and info["tp_size"] == 4
        # one request: fewer than decode_log_interval (40) decode batches, so SGLang has not folded a figure yet
        assert "avg_spec_accept_length" not in info["internal_states"][0]
        assert "sglang-repro-reference-server/post-fix" in info["version"] and "not SGLang" in info["version"]


def test_bad_requests_are_400(post_fix_graph_server):
    s = post_fix_graph_server
    assert s.post("/generate", {"input_ids": [-1, 2]})[0] == 400
    assert s.post("/generate", {"input_ids": [2**31]})[0] == 400
    assert s.post("/generate", {"text": "a", "input_ids": [1]})[0] == 400
    assert s.post("/generate", {"text": "a", "sampling_params": {"max_new_tokens": 0}})[0] == 400


async def _stream(url: str, body: dict) -> list[str]:
    async with (aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session,
                session.post(url + "/generate", json={**body, "stream": True}) as resp):
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        return [line.decode().strip() async for line in resp.content if line.strip()]


def test_streaming_is_cumulative_sse(post_fix_graph_server):
    s = post_fix_graph_server
    lines = asyncio.run(_stream(s.url, {"input_ids": list(range(40)), "sampling_params": {"max_new_tokens": 30, **GREEDY}}))
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert all(line.startswith("data: ") for line in lines)
    counts = [e["meta_info"]["completion_tokens"] for e in events]
    assert counts == sorted(counts) and counts[-1] == 30
    for a, b in zip(events, events[1:]):
        assert b["output_ids"][: len(a["output_ids"])] == a["output_ids"]  # cumulative, not deltas
        assert b["text"].startswith(a["text"].rstrip("\ufffd"))
    final = events[-1]["meta_info"]
    assert final["finish_reason"]["type"] == "length"
    assert {"prompt_tokens", "completion_tokens", "spec_verify_ct", "spec_accept_length",
            "spec_accept_histogram", "e2e_latency"} <= final.keys()


async def _concurrent(url: str, n: int) -> list[dict]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        async def one(i: int) -> dict:
            body = {"input_ids": [i * 97 + j for j in range(50)], "sampling_params": {"max_new_tokens": 40, **GREEDY}}
            async with session.post(url + "/generate", json=body) as resp:
                assert resp.status == 200
                return await resp.json()
        return await asyncio.gather(*(one(i) for i in range(n)))


def test_concurrent_requests_are_batched_and_match_ground_truth(post_fix_graph_server):
    s = post_fix_graph_server
    before = json.loads(s.get("/sim/stats")[1])
    outs = asyncio.run(_concurrent(s.url, 6))
    after = json.loads(s.get("/sim/stats")[1])
    tokens = sum(o["meta_info"]["completion_tokens"] for o in outs)
    verifies = sum(o["meta_info"]["spec_verify_ct"] for o in outs)
    assert after["completion_tokens"] - before["completion_tokens"] == tokens == 6 * 40
    assert after["verify_steps"] - before["verify_steps"] == verifies
    assert after["requests"] - before["requests"] == 6
    # Continuous batching: fewer target forwards than the requests' verify steps added up.
    assert after["forward_steps"] - before["forward_steps"] < verifies
    assert after["draft_kv_writes"] == 0 and after["busy_s"] > before["busy_s"]
    assert after["revision"] == "post-fix"
    assert after["accept_length"] == pytest.approx(after["completion_tokens"] / after["verify_steps"])


def test_metrics_and_flush_cache(post_fix_graph_server):
    s = post_fix_graph_server
    s.post("/generate", {"input_ids": [5] * 10, "sampling_params": {"max_new_tokens": 12, **GREEDY}})
    status, body = s.get("/metrics")
    text = body.decode()
    assert status == 200
    values = {line.split("{")[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.startswith("sglang:")}
    stats = json.loads(s.get("/sim/stats")[1])
    assert values["sglang:spec_accept_length"] == pytest.approx(stats["accept_length"])
    assert values["sglang:generation_tokens_total"] == stats["completion_tokens"]
    assert "not SGLang" in text
    assert s.get("/flush_cache")[0] == 200
    assert s.post("/flush_cache", {})[0] == 200
