"""The reference server follows harness.contract.facts where it models SGLang (tests/test_contract.py checks the
same constants against real SGLang 0.5.14 and 0.5.15): readiness, health, warm-up, stream, meta_info,
metrics, server info, log prefixes."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from harness.contract import facts as contract
from harness.sim.model_config import resolve_model
from harness.sim.server_settings import health_settings
from harness.sim.tokenizer import BOS_ID, ByteTokenizer
from harness.sim.warmup import warmup_request
from tests.helpers import SimServer, start_server, stop_server
from tests.sim.sim_helpers import GRAPH_28264

pytestmark = pytest.mark.slow


# -- in process --------------------------------------------------------------------------------


def test_warmup_request_of_a_vision_model_is_sglangs_chat_with_one_image() -> None:
    request = warmup_request(resolve_model("google/gemma-4-31B-it"))
    assert (request.path, request.kind, request.max_new_tokens) == (
        contract.WARMUP_CHAT_PATH, "chat-with-image", contract.WARMUP_MAX_NEW_TOKENS)
    assert len(request.input_ids) > contract.WARMUP_IMAGE_SOFT_TOKENS_GEMMA4
    assert ByteTokenizer().decode(request.input_ids).endswith(f"{contract.WARMUP_IMAGE_PROMPT}\nmodel\n")


def test_warmup_request_of_a_text_model_is_sglangs_generate(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}))
    request = warmup_request(resolve_model(str(tmp_path)))
    assert (request.path, request.kind) == (contract.GENERATE_PATH, "text")
    assert request.input_ids == (BOS_ID, *ByteTokenizer().encode(contract.WARMUP_TEXT))
    # a vision_config makes it multimodal, as SGLang's is_image_understandable_model
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["X"], "vision_config": {}}))
    assert warmup_request(resolve_model(str(tmp_path))).path == contract.WARMUP_CHAT_PATH


@pytest.mark.parametrize(("env", "expected"), [
    ({}, (contract.HEALTH_GENERATION_DEFAULT, float(contract.HEALTH_CHECK_TIMEOUT_S))),
    ({contract.HEALTH_GENERATION_ENV: "No"}, (False, 20.0)),
    ({contract.HEALTH_GENERATION_ENV: "y", contract.HEALTH_CHECK_TIMEOUT_ENV: "3"}, (True, 3.0)),
])
def test_health_settings_read_the_environment_as_sglang(env: dict[str, str], expected: tuple[bool, float]) -> None:
    assert health_settings(env) == expected


def test_a_health_setting_sglang_would_reject_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match=contract.HEALTH_GENERATION_ENV):
        health_settings({contract.HEALTH_GENERATION_ENV: "maybe"})


# -- real server processes ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    log = tmp_path_factory.mktemp("contract") / "server.log"
    # decode-log-interval 1: avg_spec_accept_length is folded every decode batch (SGLang: every 40)
    started = start_server([*GRAPH_28264, "--enable-metrics", "--decode-log-interval", "1", "--sim-revision", "post-fix"],
                           log)
    yield started
    stop_server(started)


def _timed_get(server: SimServer, path: str) -> tuple[int, float]:
    began = time.monotonic()
    status, _ = server.get(path, timeout=30)
    return status, time.monotonic() - began


def test_ready_line_after_uvicorns_line_and_the_warmup(server: SimServer) -> None:
    log = server.log_text()
    assert log.index(contract.UVICORN_RUNNING) < log.index("warm-up request done") < log.index(contract.READY_LINE)


def test_health_generates_and_answers_after_the_poll_interval(server: SimServer) -> None:
    for path in (contract.HEALTH_PATH, contract.HEALTH_GENERATE_PATH):
        status, elapsed = _timed_get(server, path)
        assert status == 200 and contract.HEALTH_CHECK_POLL_S <= elapsed < contract.HEALTH_PROBE_TIMEOUT_S


def test_stream_shape_and_meta_info_keys(server: SimServer) -> None:
    import urllib.request

    body = {"input_ids": list(range(40)), "stream": True,
            "sampling_params": {"max_new_tokens": 8, "temperature": 0, "ignore_eos": True}}
    request = urllib.request.Request(server.url + contract.GENERATE_PATH, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        events = [line for line in response.read().decode().split("\n\n") if line]
    assert all(e.startswith(contract.STREAM_DATA_PREFIX) for e in events)
    assert events[-1] == contract.STREAM_DONE
    meta = json.loads(events[-2][len(contract.STREAM_DATA_PREFIX):])["meta_info"]
    assert set(contract.META_INFO_KEYS) | set(contract.SPEC_META_INFO_KEYS) <= set(meta)


def test_abort_reason_has_sglangs_shape(server: SimServer) -> None:
    body = {"input_ids": list(range(10)), "stream": True, "sampling_params": {"max_new_tokens": 10**6}}
    import urllib.request

    request = urllib.request.Request(server.url + contract.GENERATE_PATH, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        events = [line for line in response.read().decode().split("\n\n") if line]
    assert events[-1] == contract.STREAM_DONE
    reason = json.loads(events[-2][len(contract.STREAM_DATA_PREFIX):])["meta_info"]["finish_reason"]
    assert reason["type"] == contract.ABORT_TYPE and set(reason) <= set(contract.ABORT_KEYS)


def test_server_info_metrics_and_model_info(server: SimServer) -> None:
    server.post(contract.GENERATE_PATH, {"input_ids": list(range(30)),
                                         "sampling_params": {"max_new_tokens": 16, "temperature": 0}})
    for path in contract.SERVER_INFO_PATHS:
        status, raw = server.get(path)
        assert status == 200 and contract.AVG_ACCEPT_LENGTH_KEY in json.loads(raw)["internal_states"][0]
    for path in contract.MODEL_INFO_PATHS:
        status, raw = server.get(path)
        assert status == 200 and json.loads(raw)["has_image_understanding"] is True
    status, raw = server.get(contract.METRICS_PATH)
    names = set(re.findall(r"^(sglang:\w+)\{", raw.decode(), re.MULTILINE))
    assert status == 200 and names and names <= set(contract.METRIC_NAMES)
    assert server.get(contract.MODELS_PATH)[0] == 200


def test_log_prefix_tags_are_sglangs(server: SimServer) -> None:
    tags = {t for m in re.finditer(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d((?: \w+)*)\]", server.log_text(), re.MULTILINE)
            for t in m.group(1).split()}
    assert tags and {re.sub(r"\d+$", "", t) for t in tags} <= set(contract.LOG_RANK_TAGS)


def test_503_while_the_warmup_runs_then_ready(tmp_path: Path) -> None:
    # a slow model (step cost) so that the warm-up's 8 tokens take seconds: SGLang answers 503 meanwhile
    server = start_server([*GRAPH_28264, "--sim-revision", "post-fix", "--speculative-num-steps", "1",
                           "--speculative-num-draft-tokens", "2", "--sim-step-cost-ms", "400"],
                          tmp_path / "server.log", wait_ready=False)
    try:
        statuses: list[int] = []
        deadline = time.monotonic() + 90
        while contract.READY_LINE not in server.log_text() and time.monotonic() < deadline:
            assert server.poll() is None, server.log_text()[-2000:]
            log = server.log_text()
            if "warm-up request (as SGLang's" in log and "warm-up request done" not in log:
                status = server.get(contract.HEALTH_PATH)[0]
                if "warm-up request done" not in server.log_text():  # SGLang turns Up as the warm-up returns
                    statuses.append(status)
            time.sleep(0.1)
        assert contract.READY_LINE in server.log_text()
        assert statuses and set(statuses) == {contract.HEALTH_STARTING_STATUS}
        assert server.get(contract.HEALTH_PATH, timeout=30)[0] == 200
    finally:
        stop_server(server)


def test_health_without_generation_answers_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(contract.HEALTH_GENERATION_ENV, "false")
    server = start_server([*GRAPH_28264, "--sim-revision", "post-fix", "--skip-server-warmup"], tmp_path / "s.log")
    try:
        status, elapsed = _timed_get(server, contract.HEALTH_PATH)
        assert status == 200 and elapsed < contract.HEALTH_CHECK_POLL_S
        status, elapsed = _timed_get(server, contract.HEALTH_GENERATE_PATH)  # still generates
        assert status == 200 and elapsed >= contract.HEALTH_CHECK_POLL_S
        assert "warm-up request" not in server.log_text()  # --skip-server-warmup
    finally:
        stop_server(server)


