"""SGLang's native HTTP API over the scheduler client (aiohttp).

Endpoints: /health, /health_generate, /get_model_info, /get_server_info, /server_info, /generate
(JSON or SSE streaming with cumulative text), /flush_cache, /v1/models, /metrics (with
--enable-metrics), and the reference server's own ground truth at /sim/stats.
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import json
import logging
import time
import uuid
from typing import Any

from aiohttp import web

from harness.sim import SIM_LABEL, SIM_NAME, version_string
from harness.sim.scheduler_client import PendingRequest, SchedulerClient, SchedulerGone
from harness.sim.server_settings import SchedulerSettings
from harness.sim.sglang_words import (
    AUTH_EXEMPT_PREFIXES,
    HEALTH_CHECK_INPUT_IDS,
    HEALTH_CHECK_POLL_S,
    HEALTH_CHECK_RID_PREFIX,
    HEALTH_CHECK_TIMEOUT_S,
    HEALTH_GENERATION_DEFAULT,
    HEALTH_PATH,
    HEALTH_STARTING_STATUS,
    UNAUTHORIZED_ERROR,
)
from harness.sim.tokenizer import ByteTokenizer

__all__ = ["ApiState", "build_app", "run_internal_request", "InternalRequestFailed"]

logger = logging.getLogger(__name__)

_MAX_ID = 2**31
_REQUEST_TIMEOUT_S = 600.0


class ApiState:
    def __init__(self, args: argparse.Namespace, settings: SchedulerSettings, client: SchedulerClient,
                 health_generation: bool = HEALTH_GENERATION_DEFAULT,
                 health_timeout_s: float = HEALTH_CHECK_TIMEOUT_S) -> None:
        self.args = args
        self.settings = settings
        self.client = client
        self.tokenizer = ByteTokenizer()
        self.up = False  # SGLang's ServerStatus.Starting until the warm-up succeeded (or was skipped)
        self.served_name = args.served_model_name or args.model_path
        self.health_generation = health_generation
        self.health_timeout_s = health_timeout_s


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "code": status}}, status=status)


class _BadRequest(ValueError):
    pass


def _parse_generate(body: object, state: ApiState) -> tuple[list[int], dict, list[str]]:
    if not isinstance(body, dict):
        raise _BadRequest("the body must be a JSON object")
    text, ids = body.get("text"), body.get("input_ids")
    if (text is None) == (ids is None):
        raise _BadRequest("give exactly one of 'text' or 'input_ids'")
    if text is not None:
        if not isinstance(text, str) or not text:
            raise _BadRequest("'text' must be a non-empty string (one prompt per request)")
        ids = state.tokenizer.encode(text)
    elif not (isinstance(ids, list) and ids and all(isinstance(i, int) and not isinstance(i, bool) for i in ids)):
        raise _BadRequest("'input_ids' must be a non-empty list of integers (one prompt per request)")
    elif any(i < 0 or i >= _MAX_ID for i in ids):
        raise _BadRequest(f"'input_ids' must be within [0, {_MAX_ID})")
    sp = body.get("sampling_params") or {}
    if not isinstance(sp, dict):
        raise _BadRequest("'sampling_params' must be an object")
    try:
        max_new_tokens = int(sp.get("max_new_tokens", 128))
        temperature = float(sp.get("temperature", 1.0))
        ignore_eos = bool(sp.get("ignore_eos", False))
    except (TypeError, ValueError) as exc:
        raise _BadRequest(f"bad sampling_params: {exc}") from None
    if max_new_tokens < 1 or temperature < 0:
        raise _BadRequest("max_new_tokens must be >= 1 and temperature >= 0")
    params = {"max_new_tokens": max_new_tokens, "temperature": temperature, "ignore_eos": ignore_eos,
              "seed": sp.get("sampling_seed")}
    stop = sp.get("stop") or []
    stop = [stop] if isinstance(stop, str) else [s for s in stop if isinstance(s, str) and s]
    return ids, params, stop


def _apply_stop(text: str, stop: list[str]) -> tuple[str, str | None]:
    cut, matched = len(text), None
    for s in stop:
        i = text.find(s)
        if 0 <= i < cut:
            cut, matched = i, s
    return text[:cut], matched


class InternalRequestFailed(RuntimeError):
    """The server's own request (the warm-up) ended in an abort."""


async def run_internal_request(state: ApiState, input_ids: list[int], timeout: float, max_new_tokens: int = 1) -> dict:
    """A greedy request of the server's own (the warm-up) outside the statistics; its finish reason.
    Raises TimeoutError, or InternalRequestFailed on an abort."""
    rid = f"internal-{uuid.uuid4().hex}"
    pending = state.client.submit(rid, {"input_ids": input_ids, "count_in_stats": False, "sampling_params": {
        "max_new_tokens": max_new_tokens, "temperature": 0.0, "ignore_eos": True}})

    async def finished() -> dict:
        while (finish := (await pending.queue.get())[1]) is None:
            pass
        return finish

    try:
        # wait_for, not asyncio.timeout: the harness supports Python 3.10, where asyncio.TimeoutError is
        # not yet the built-in TimeoutError that callers catch.
        finish = await asyncio.wait_for(finished(), timeout)
    except asyncio.TimeoutError:
        raise TimeoutError(f"internal request {rid} did not finish in {timeout:g} s") from None
    finally:
        state.client.release(rid)
    if finish.get("type") == "abort":
        raise InternalRequestFailed(str(finish.get("message", "aborted")))
    return finish


def _event(state: ApiState, pending: PendingRequest, meta: dict, finish: dict | None, stop: list[str],
           started: float) -> tuple[dict, bool]:
    text, matched = _apply_stop(state.tokenizer.decode(pending.output_ids), stop)
    if matched is not None:
        finish = {"type": "stop", "matched": matched}
    meta = dict(meta, finish_reason=finish, e2e_latency=time.monotonic() - started)
    return {"text": text, "output_ids": list(pending.output_ids), "meta_info": meta, "index": 0}, finish is not None


async def generate(request: web.Request) -> web.StreamResponse:
    state: ApiState = request.app["state"]
    started = time.monotonic()
    try:
        body = await request.json()
        ids, params, stop = _parse_generate(body, state)
    except json.JSONDecodeError:
        return _error(400, "the body is not valid JSON")
    except _BadRequest as exc:
        return _error(400, str(exc))
    rid = str(body.get("rid") or uuid.uuid4().hex)
    pending = state.client.submit(rid, {"input_ids": ids, "sampling_params": params})
    stream = bool(body.get("stream", False))
    resp: web.StreamResponse | None = None
    done = scheduler_done = False
    try:
        if stream:
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
            await resp.prepare(request)
        while True:
            meta, finish = await asyncio.wait_for(pending.queue.get(), _REQUEST_TIMEOUT_S)
            scheduler_done = finish is not None
            event, done = _event(state, pending, meta, finish, stop, started)
            if done and (finish or {}).get("type") == "abort" and not stream:
                return _error(400, str(finish.get("message", "aborted")))
            if resp is not None:  # set exactly when streaming
                await resp.write(b"data: " + json.dumps(event).encode() + b"\n\n")
            if done:
                break
        if resp is not None:
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
            return resp
        return web.json_response(event)
    except asyncio.TimeoutError:
        return _error(504, f"no progress within {_REQUEST_TIMEOUT_S:.0f} s")
    finally:
        if scheduler_done:
            state.client.release(rid)
        else:  # client went away, timeout or stop string: the scheduler stops working on it
            state.client.abort(rid)


async def health(request: web.Request) -> web.Response:
    """/health and /health_generate, as SGLang's one handler: 503 while starting; with health generation
    on (the default) a one-token request, answered 200 once anything came back from the scheduler,
    looking once a second, 503 after the timeout; with it off, /health answers 200 at once."""
    state: ApiState = request.app["state"]
    if not state.up:
        return web.Response(status=HEALTH_STARTING_STATUS)
    if not state.health_generation and request.path == HEALTH_PATH:
        return web.Response(status=200)
    rid = f"{HEALTH_CHECK_RID_PREFIX}_{uuid.uuid4().hex}"
    tic = time.time()
    state.client.submit(rid, {"input_ids": list(HEALTH_CHECK_INPUT_IDS), "count_in_stats": False,
                              "sampling_params": {"max_new_tokens": 1, "temperature": 0.0, "ignore_eos": True}})
    try:
        while time.time() < tic + state.health_timeout_s:
            await asyncio.sleep(HEALTH_CHECK_POLL_S)
            if state.client.last_receive > tic:
                return web.Response(status=200)
    finally:
        state.client.release(rid)
    logger.error("Health check failed. Server couldn't get a response from detokenizer for last %d seconds. %s",
                 state.health_timeout_s, SIM_LABEL)
    return web.Response(status=503)


async def model_info(request: web.Request) -> web.Response:
    state: ApiState = request.app["state"]
    a, t = state.args, state.settings.target
    return web.json_response({
        "model_path": a.model_path, "tokenizer_path": a.tokenizer_path or a.model_path, "is_generation": True,
        "preferred_sampling_params": None, "weight_version": "default", "has_image_understanding": t.has_vision,
        "has_audio_understanding": False, "model_type": t.model_type, "architectures": [t.architecture],
    })


async def _stats(state: ApiState) -> dict:
    try:
        stats = await state.client.call("stats")
    except SchedulerGone as exc:
        raise web.HTTPServiceUnavailable(text=str(exc)) from None
    if not isinstance(stats, dict):
        raise web.HTTPInternalServerError(text=f"the scheduler answered stats with {type(stats).__name__}")
    return stats


async def server_info(request: web.Request) -> web.Response:
    state: ApiState = request.app["state"]
    stats = await _stats(state)
    flat = {k: v for k, v in vars(state.args).items()}
    # SGLang reports its settings after post-init, Gemma-4's default backend filled in (RESOLVED_ATTENTION_KEYS)
    flat["attention_backend"] = state.settings.server_attention_backend
    if state.settings.speculative:
        flat["speculative_algorithm"] = "FROZEN_KV_MTP"
    internal = {"last_gen_throughput": stats["gen_throughput"], "memory_usage": {"kv_free_slots": stats["free_kv_slots"]}}
    if stats["server_accept_length"] is not None:  # SGLang's folded figure (harness.sim.metrics_reporter)
        internal["avg_spec_accept_length"] = stats["server_accept_length"]
    return web.json_response({**flat, "internal_states": [internal], "version": version_string(state.args.sim_revision),
                              "sim_stats": stats})


async def sim_stats(request: web.Request) -> web.Response:
    return web.json_response(await _stats(request.app["state"]))


async def sim_reset_stats(request: web.Request) -> web.Response:
    """The reference server's own: start a new ground-truth window (a trial on a shared server)."""
    state: ApiState = request.app["state"]
    try:
        ok = await state.client.call("reset_stats")
    except SchedulerGone as exc:
        return web.Response(status=503, text=str(exc))
    return web.json_response({"reset": bool(ok)}, status=200 if ok else 409)


async def flush_cache(request: web.Request) -> web.Response:
    state: ApiState = request.app["state"]
    try:
        ok = await state.client.call("flush_cache")
    except SchedulerGone as exc:
        return web.Response(status=503, text=str(exc))
    if ok:
        return web.Response(text="Cache flushed.\nPlease check backend logs for more details. "
                                 "(When there are running or waiting requests, the operation will not be performed.)\n")
    return web.Response(status=400, text="Cache not flushed: there are running or waiting requests.\n")


async def models(request: web.Request) -> web.Response:
    state: ApiState = request.app["state"]
    return web.json_response({"object": "list", "data": [{
        "id": state.served_name, "object": "model", "created": int(time.time()), "owned_by": SIM_NAME,
        "root": state.args.model_path, "max_model_len": state.settings.context_length}]})


def _metrics_text(state: ApiState, stats: dict) -> str:
    escaped = state.served_name.replace("\\", "\\\\").replace('"', '\\"')
    label = f'{{model_name="{escaped}"}}'
    rows = [
        ("spec_accept_length", "gauge", "Average acceptance length of speculative decoding.", stats["accept_length"] or 0.0),
        ("spec_accept_rate", "gauge", "Accepted draft tokens over proposed draft tokens.", stats["accept_rate"] or 0.0),
        ("prompt_tokens_total", "counter", "Number of prefill tokens processed.", stats["prompt_tokens"]),
        ("generation_tokens_total", "counter", "Number of generation tokens processed.", stats["completion_tokens"]),
        ("num_requests_total", "counter", "Number of requests processed.", stats["requests"]),
        ("num_running_reqs", "gauge", "The number of running requests.", stats["running"]),
        ("num_queue_reqs", "gauge", "The number of requests in the waiting queue.", stats["waiting"]),
        ("gen_throughput", "gauge", "The generation throughput (token/s).", stats["gen_throughput"]),
    ]
    lines = [f"# {SIM_LABEL} CPU model of SGLang's metrics; not SGLang"]
    for name, kind, help_text, value in rows:
        lines += [f"# HELP sglang:{name} {help_text}", f"# TYPE sglang:{name} {kind}", f"sglang:{name}{label} {float(value)}"]
    return "\n".join(lines) + "\n"


async def metrics(request: web.Request) -> web.Response:
    state: ApiState = request.app["state"]
    if not state.args.enable_metrics:
        return web.Response(status=404, text="metrics are off; start the server with --enable-metrics\n")
    return web.Response(text=_metrics_text(state, await _stats(state)), content_type="text/plain")


def _api_key_middleware(api_key: str | None) -> Any:
    """SGLang's --api-key: every path but /health* and /metrics* wants the key as a bearer token, else 401
    {"error": "Unauthorized"} (harness.sim.sglang_words AUTH_EXEMPT_PREFIXES, UNAUTHORIZED_ERROR)."""

    @web.middleware
    async def check(request: web.Request, handler: Any) -> web.StreamResponse:
        if api_key and request.method != "OPTIONS" and not request.path.startswith(AUTH_EXEMPT_PREFIXES):
            scheme, _, token = request.headers.get("Authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(token, api_key):
                return web.json_response({"error": UNAUTHORIZED_ERROR}, status=401)
        return await handler(request)

    return check


def build_app(state: ApiState) -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024,
                          middlewares=[_api_key_middleware(getattr(state.args, "api_key", None))])
    app["state"] = state
    app.router.add_get("/health", health)
    app.router.add_get("/health_generate", health)
    app.router.add_get("/get_model_info", model_info)
    app.router.add_get("/model_info", model_info)
    app.router.add_get("/get_server_info", server_info)
    app.router.add_get("/server_info", server_info)
    app.router.add_get("/sim/stats", sim_stats)
    app.router.add_post("/sim/reset_stats", sim_reset_stats)
    app.router.add_post("/generate", generate)
    app.router.add_route("*", "/flush_cache", flush_cache)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics)
    return app
