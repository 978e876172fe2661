"""A small peer that speaks SGLang's native HTTP API, for testing the harness's client side.

It is the *peer*, not the thing under test: a real aiohttp server on 127.0.0.1 (in its own thread and event
loop, so its timing does not share the client's loop) that answers `/generate` (streaming and not),
`/get_server_info` or `/server_info`, and `/metrics` the way SGLang does, and records what it saw (max requests
in flight, arrival times, request bodies) so tests can check the client's behaviour from the outside.

Output model: after `first_delay_s` one token (the prefill's), then one event per verify step carrying
`tokens_per_event` tokens every `step_s`, like speculative decoding with a fixed acceptance length.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field

from aiohttp import web

__all__ = ["PeerConfig", "PeerServer"]


@dataclass(frozen=True)
class PeerConfig:
    first_delay_s: float = 0.01
    step_s: float = 0.005
    tokens_per_event: int = 3
    # Requests with exactly this many prompt tokens never answer (until the peer closes): a stalled server.
    stall_prompt_tokens: int | None = None
    # Older SGLang releases: no `spec_accept_length`, draft counts under other names.
    legacy_keys: bool = False
    server_info_path: str = "/get_server_info"
    server_info_has_accept: bool = True
    metrics_text: str = ""
    # Speculative decoding off: no spec_* keys at all.
    spec: bool = True
    # The stream stops without `data: [DONE]`, as when the server dies mid-answer.
    truncate_stream: bool = False


@dataclass
class PeerStats:
    inflight: int = 0
    max_inflight: int = 0
    arrivals: list[float] = field(default_factory=list)
    bodies: list[dict] = field(default_factory=list)
    completion_tokens: int = 0
    verify_steps: int = 0


class PeerServer:
    """Context manager: `with PeerServer(PeerConfig(...)) as peer: peer.base_url`."""

    def __init__(self, config: PeerConfig | None = None) -> None:
        self.config = config or PeerConfig()
        self.stats = PeerStats()
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="sglang-peer", daemon=True)
        self._runner: web.AppRunner | None = None
        self._closing: asyncio.Event | None = None
        self.base_url = ""

    def __enter__(self) -> PeerServer:
        self._thread.start()
        try:
            port = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        except BaseException:
            self._stop_loop()
            raise
        self.base_url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()

    async def _start(self) -> int:
        self._closing = asyncio.Event()
        app = web.Application()
        app.router.add_post("/generate", self._generate)
        app.router.add_get(self.config.server_info_path, self._server_info)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/health", self._health)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        return self._runner.addresses[0][1]

    async def _stop(self) -> None:
        assert self._closing is not None and self._runner is not None
        self._closing.set()
        await self._runner.cleanup()

    # --- handlers -------------------------------------------------------------------------------

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        with self._lock:
            self.stats.arrivals.append(time.monotonic())
            self.stats.bodies.append(body)
            self.stats.inflight += 1
            self.stats.max_inflight = max(self.stats.max_inflight, self.stats.inflight)
        try:
            return await self._answer(request, body)
        finally:
            with self._lock:
                self.stats.inflight -= 1

    async def _answer(self, request: web.Request, body: dict) -> web.StreamResponse:
        cfg = self.config
        ids = body.get("input_ids")
        prompt_tokens = len(ids) if ids is not None else len(str(body.get("text", "")).split())
        max_new = int(body.get("sampling_params", {}).get("max_new_tokens", 16))
        if cfg.stall_prompt_tokens is not None and prompt_tokens == cfg.stall_prompt_tokens:
            assert self._closing is not None
            await asyncio.wait_for(self._closing.wait(), timeout=60)
            raise web.HTTPServiceUnavailable()
        seed = sum(ids) if ids else prompt_tokens
        out_ids = [(seed + k) % 1000 for k in range(max_new)]
        # Event boundaries: the prefill token, then verify steps of tokens_per_event tokens.
        bounds = [1]
        while bounds[-1] < max_new:
            bounds.append(min(max_new, bounds[-1] + cfg.tokens_per_event))

        def event(n: int, verify: int) -> dict:
            meta: dict = {"id": "peer", "prompt_tokens": prompt_tokens, "completion_tokens": n, "cached_tokens": 0}
            if cfg.spec and verify:
                meta["spec_verify_ct"] = verify
                if cfg.legacy_keys:
                    meta["spec_accept_token_num"] = n - 1 - verify
                    meta["spec_draft_token_num"] = verify * cfg.tokens_per_event
                else:
                    meta["spec_accept_length"] = n / verify
            if n == max_new:
                meta["finish_reason"] = {"type": "length", "length": max_new}
            return {"text": "".join(f" t{i}" for i in out_ids[:n]), "output_ids": out_ids[:n], "meta_info": meta}

        verify_total = len(bounds) - 1
        with self._lock:
            self.stats.completion_tokens += max_new
            self.stats.verify_steps += verify_total
        if not body.get("stream"):
            await asyncio.sleep(cfg.first_delay_s + cfg.step_s * verify_total)
            return web.json_response(event(max_new, verify_total))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await asyncio.sleep(cfg.first_delay_s)
        for verify, n in enumerate(bounds):
            if verify:
                await asyncio.sleep(cfg.step_s)
            await resp.write(f"data: {json.dumps(event(n, verify))}\n\n".encode())
        if not cfg.truncate_stream:
            await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def _health(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _server_info(self, _request: web.Request) -> web.Response:
        state: dict = {"memory_usage": {"weight": 1.0}}
        with self._lock:
            if self.config.server_info_has_accept and self.stats.verify_steps:
                state["avg_spec_accept_length"] = self.stats.completion_tokens / self.stats.verify_steps
        return web.json_response({"version": "peer-0", "internal_states": [state]})

    async def _metrics(self, _request: web.Request) -> web.Response:
        if not self.config.metrics_text:
            raise web.HTTPNotFound()
        return web.Response(text=self.config.metrics_text, content_type="text/plain")
