"""One real SGLang server on the CPU, observed once per release: everything the live tests compare.

A server costs a minute on two loaded cores, so one server per release is started, asked everything the
lifecycle and contract tests look at (endpoints with and without the API key, generation plain, by
``input_ids`` and streamed, the prefix cache before and after a flush, an abort, the ``/health`` timing,
the metrics, a decode-speed sample), then stopped with SIGTERM while a request is in flight. The tests
then assert over this record; none of them starts a server of its own.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from harness.contract import facts as contract
from harness.util.kill import signal_process
from tests.sglang_cpu.live import CpuServer, Stopped, start_cpu_server, stop_cpu_server

__all__ = ["API_KEY", "GET_PATHS", "PROMPT", "SPEC_MAX_NEW_TOKENS", "SPEC_PROMPTS", "CrashObservations", "Observations",
           "observe_plain_server", "observe_scheduler_kill", "stream_events"]

API_KEY = "sglang-repro-live-test-key"
PROMPT = "hello world the quick brown fox"
# Greedy references for the speculative servers (tests/sglang_cpu/test_speculative.py): one plain, one whose
# words repeat (NGRAM's drafts come from n-grams already seen).
SPEC_PROMPTS = (PROMPT, "one two three four one two three four one two three four one two three")
SPEC_MAX_NEW_TOKENS = 32
# Every GET path a running server is asked for, with the key.
GET_PATHS = (contract.HEALTH_PATH, contract.HEALTH_GENERATE_PATH, *contract.SERVER_INFO_PATHS, *contract.MODEL_INFO_PATHS,
             contract.MODELS_PATH, contract.METRICS_PATH)
# In flight when SIGTERM comes: longer than two drain looks (SIGTERM_POLL_S), so the drain line and its period show.
# The drain request must outlive two drain looks (SIGTERM_POLL_S) whatever the machine's speed, so its length is
# three looks' worth of tokens at the decode speed just measured (800 tokens, fixed, finished inside one look on an
# idle machine), within the tiny model's positions.
_DRAIN_LOOKS = 3
_DRAIN_TOKENS_MIN, _DRAIN_TOKENS_MAX = 800, 3500
_THROUGHPUT_TOKENS = 200


@dataclass
class Observations:
    version: str
    ready_s: float
    health_before_ready: list[int]
    tree: tuple[str, ...] = ()
    tree_rss_bytes: int = 0
    get: dict[str, tuple[int, bytes, float]] = field(default_factory=dict)
    unauthenticated: dict[str, int] = field(default_factory=dict)
    unauthorized_body: bytes = b""
    generated: dict[str, object] = field(default_factory=dict)
    generated_by_ids: dict[str, object] = field(default_factory=dict)
    stream_raw: bytes = b""
    cached_second: dict[str, object] = field(default_factory=dict)
    flush_status: int = 0
    after_flush: dict[str, object] = field(default_factory=dict)
    abort_last: dict[str, object] = field(default_factory=dict)
    decode_tokens_per_s: float = 0.0
    prompt_tokens_for_speed: int = 0
    greedy: dict[str, list[int]] = field(default_factory=dict)  # SPEC_PROMPTS -> output_ids
    drain_status: int = 0
    stopped: Stopped | None = None
    log: str = ""

    def json_of(self, path: str) -> dict[str, object]:
        status, body, _ = self.get[path]
        assert status == 200, f"sglang {self.version} GET {path}: HTTP {status}"
        value = json.loads(body)
        assert isinstance(value, dict)
        return value


def stream_events(raw: bytes) -> list[str]:
    """The ``data: ...`` lines of a streamed answer, in order."""
    return [line for line in raw.decode("utf-8", errors="replace").split("\n\n") if line.strip()]


def _meta(answer: dict[str, object]) -> dict[str, object]:
    meta = answer.get("meta_info")
    assert isinstance(meta, dict), answer
    return meta


def _last_event(raw: bytes) -> dict[str, object]:
    events = [e for e in stream_events(raw) if e.strip() != contract.STREAM_DONE]
    assert events, raw[-300:]
    value = json.loads(events[-1][len(contract.STREAM_DATA_PREFIX):])
    assert isinstance(value, dict)
    return value


def _abort_one(server: CpuServer) -> dict[str, object]:
    """A streamed request aborted by ``/abort_request`` while it decodes: its last event."""
    result: dict[str, tuple[int, bytes, float]] = {}
    body = {"text": "abc", "rid": "sglang-repro-abort", "stream": True,
            "sampling_params": {"max_new_tokens": 2000, "ignore_eos": True}}
    thread = threading.Thread(target=lambda: result.setdefault("r", server.request("POST", contract.GENERATE_PATH, body,
                                                                                 timeout=300)))
    thread.start()
    time.sleep(1.5)
    server.request("POST", "/abort_request", {"rid": "sglang-repro-abort"})
    thread.join(timeout=300)
    status, raw, _ = result["r"]
    assert status == 200, (status, raw[-300:])
    return _last_event(raw)


def observe_plain_server(version: str, model: Path, workdir: Path) -> Observations:
    """Start real ``version`` (``--enable-metrics``, ``--log-requests``, an API key), observe it, SIGTERM it."""
    server = start_cpu_server(version, model, workdir / f"sglang-{version}.log", ["--enable-metrics", "--log-requests"],
                              api_key=API_KEY)
    try:
        seen = Observations(version, server.ready_s or 0.0, list(server.health_before_ready))
        tree = server.tree()
        seen.tree = tuple(p.name() for p in tree)
        seen.tree_rss_bytes = sum(p.memory_info().rss for p in tree)
        for path in GET_PATHS:
            seen.get[path] = server.request("GET", path, timeout=60)
        for method, path in (("POST", contract.GENERATE_PATH), ("GET", contract.HEALTH_PATH), ("GET", contract.METRICS_PATH)):
            status, body, _ = server.request(method, path, {"text": "hi"} if method == "POST" else None, auth=False)
            seen.unauthenticated[path] = status
            if path == contract.GENERATE_PATH:
                seen.unauthorized_body = body
        greedy = {"max_new_tokens": 8, "temperature": 0}
        seen.generated = server.generate({"text": PROMPT, "sampling_params": greedy})
        seen.cached_second = _meta(server.generate({"text": PROMPT, "sampling_params": greedy}))
        ids = seen.generated.get("output_ids")
        seen.generated_by_ids = server.generate({"input_ids": [1, 5, 6, 7, 8], "sampling_params": greedy})
        status, seen.stream_raw, _ = server.request("POST", contract.GENERATE_PATH,
                                                    {"text": PROMPT, "stream": True, "sampling_params": greedy})
        assert status == 200 and ids, (status, seen.generated)
        seen.flush_status = server.request("POST", contract.FLUSH_CACHE_PATH)[0]
        seen.after_flush = _meta(server.generate({"text": PROMPT, "sampling_params": greedy}))
        seen.abort_last = _abort_one(server)
        for prompt in SPEC_PROMPTS:
            answer = server.generate({"text": prompt, "sampling_params": {"max_new_tokens": SPEC_MAX_NEW_TOKENS,
                                                                          "temperature": 0}})
            seen.greedy[prompt] = list(answer["output_ids"])  # type: ignore[call-overload]
        prompt = " ".join(["the quick brown fox jumps over the lazy dog"] * 22)
        started = time.monotonic()
        speed = server.generate({"text": prompt, "sampling_params": {"max_new_tokens": _THROUGHPUT_TOKENS,
                                                                     "ignore_eos": True, "temperature": 0}}, timeout=600)
        seconds = time.monotonic() - started
        seen.prompt_tokens_for_speed = int(_meta(speed)["prompt_tokens"])  # type: ignore[call-overload]
        seen.decode_tokens_per_s = int(_meta(speed)["completion_tokens"]) / seconds  # type: ignore[call-overload]
        drain = int(seen.decode_tokens_per_s * _DRAIN_LOOKS * contract.SIGTERM_POLL_S)
        seen.stopped, seen.drain_status = _stop_while_busy(server, min(_DRAIN_TOKENS_MAX, max(_DRAIN_TOKENS_MIN, drain)))
    finally:
        if server.proc.poll() is None:
            stop_cpu_server(server)
    seen.log = server.log_text()
    return seen


def _stop_while_busy(server: CpuServer, tokens: int) -> tuple[Stopped, int]:
    """SIGTERM the launcher while one request of ``tokens`` decodes; the request's own status once the tree is gone."""
    result: dict[str, tuple[int, bytes, float]] = {}
    body = {"text": "abc", "rid": "sglang-repro-drain",
            "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True}}
    thread = threading.Thread(target=lambda: result.setdefault("r", server.request("POST", contract.GENERATE_PATH, body,
                                                                                 timeout=300)))
    thread.start()
    deadline = time.monotonic() + 30
    while "rid='sglang-repro-drain'" not in server.log_text() and time.monotonic() < deadline:
        time.sleep(0.1)  # the request is logged as received (--log-requests) before the signal is sent
    stopped = stop_cpu_server(server, grace=300)
    thread.join(timeout=60)
    return stopped, result.get("r", (0, b"", 0.0))[0]


@dataclass
class CrashObservations:
    """A server whose scheduler was SIGKILLed after it served: how the launcher noticed and ended."""

    version: str
    killed: str
    stopped: Stopped
    log: str


def observe_scheduler_kill(version: str, model: Path, workdir: Path) -> CrashObservations:
    """Start real ``version``, let it serve one request, SIGKILL its scheduler, wait for the launcher to end."""
    import signal

    server = start_cpu_server(version, model, workdir / f"sglang-{version}-crash.log")
    try:
        server.generate({"text": PROMPT, "sampling_params": {"max_new_tokens": 4, "temperature": 0}})
        scheduler = next(p for p in server.tree() if "scheduler" in p.name())
        killed = f"{scheduler.pid}:{scheduler.name()}"
        tree = server.tree()
        signal_process(scheduler.pid, signal.SIGKILL)  # as the OOM killer would
        deadline = time.monotonic() + 120
        while server.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        # The launcher ended on its own (or not: then stop_cpu_server's SIGTERM shows up as a survivor's end).
        stopped = stop_cpu_server(server, grace=30) if server.proc.poll() is None else _ended(server, tree)
    finally:
        if server.proc.poll() is None:
            stop_cpu_server(server)
    return CrashObservations(version, killed, stopped, server.log_text())


def _ended(server: CpuServer, tree: list[psutil.Process]) -> Stopped:
    from tests.sglang_cpu.live import _alive, _name

    deadline = time.monotonic() + 30
    while any(_alive(p) for p in tree) and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = tuple(_name(p) for p in tree if _alive(p))
    for process in tree:
        with contextlib.suppress(Exception):
            process.kill()
    return Stopped(server.proc.returncode, 0.0, tuple(_name(p) for p in tree), survivors)
