"""Test server: a real aiohttp server whose /health turns 200 after --health-delay seconds (503 before).

With --answer-after S every 200 takes S seconds, as SGLang's /health does while it runs its one-token
generation (at least a second); it never logs a ready line, like SGLang at --log-level warning."""

from __future__ import annotations

import argparse
import asyncio
import time

from aiohttp import web


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--health-delay", type=float, default=0.0)
    parser.add_argument("--answer-after", type=float, default=0.0)
    args = parser.parse_args()
    started = time.monotonic()

    async def health(request: web.Request) -> web.Response:
        if time.monotonic() - started < args.health_delay:
            return web.Response(status=503, text="starting")
        await asyncio.sleep(args.answer_after)
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/health", health)
    print(f"healthy test server on 127.0.0.1:{args.port}", flush=True)
    web.run_app(app, host="127.0.0.1", port=args.port, print=None)


if __name__ == "__main__":
    main()
