"""Test server: a real aiohttp server whose /health turns 200 after --health-delay seconds (503 before)."""

from __future__ import annotations

import argparse
import time

from aiohttp import web


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--health-delay", type=float, default=0.0)
    args = parser.parse_args()
    started = time.monotonic()

    async def health(request: web.Request) -> web.Response:
        if time.monotonic() - started < args.health_delay:
            return web.Response(status=503, text="starting")
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/health", health)
    print(f"healthy test server on 127.0.0.1:{args.port}", flush=True)
    web.run_app(app, host="127.0.0.1", port=args.port, print=None)


if __name__ == "__main__":
    main()
