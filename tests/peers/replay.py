"""A tiny aiohttp server that answers every `POST /generate` by replaying a script of raw bytes.

The peer for testing the client against exact wire shapes (SGLang 0.5.15's abort stream, an in-stream error
event, several tokens per chunk): each step is `(delay_s, bytes)`, written as one HTTP chunk after the delay.
It runs in its own thread and event loop so its timing never shares the client's loop, and records when it
wrote each step (monotonic, for checks from the server's side).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from aiohttp import web

__all__ = ["ReplayServer", "Script", "sse"]


def sse(payload: bytes) -> bytes:
    """One SSE event as SGLang's http_server writes it: `data: ` + JSON + a blank line."""
    return b"data: " + payload + b"\n\n"


@dataclass(frozen=True)
class Script:
    steps: Sequence[tuple[float, bytes]]
    status: int = 200
    content_type: str = "text/event-stream"
    # Non-streaming: the whole body at once, after the sum of the delays.
    whole_body: bool = False


@dataclass
class ReplayStats:
    requests: int = 0
    writes: list[list[float]] = field(default_factory=list)  # per request, time.monotonic() of each step


class ReplayServer:
    """Context manager: `with ReplayServer(script) as srv: srv.base_url`."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.stats = ReplayStats()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="replay-peer", daemon=True)
        self._runner: web.AppRunner | None = None
        self.base_url = ""

    def __enter__(self) -> ReplayServer:
        self._thread.start()
        port = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        self.base_url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            assert self._runner is not None
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            if not self._thread.is_alive():
                self._loop.close()

    async def _start(self) -> int:
        app = web.Application()
        app.router.add_post("/generate", self._generate)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        return self._runner.addresses[0][1]

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        writes: list[float] = []
        self.stats.requests += 1
        self.stats.writes.append(writes)
        s = self.script
        if s.whole_body:
            await asyncio.sleep(sum(d for d, _ in s.steps))
            writes.append(time.monotonic())
            return web.Response(status=s.status, body=b"".join(b for _, b in s.steps), content_type=s.content_type)
        resp = web.StreamResponse(status=s.status, headers={"Content-Type": s.content_type})
        await resp.prepare(request)
        for delay, data in s.steps:
            if delay:
                await asyncio.sleep(delay)
            await resp.write(data)
            writes.append(time.monotonic())
        await resp.write_eof()
        return resp
