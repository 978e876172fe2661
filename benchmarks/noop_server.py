"""A minimal no-op streaming server that speaks enough of SGLang's native API for a load generator.

Usage: python benchmarks/noop_server.py --port PORT [--chunks 4] [--tokens-per-chunk 4]

`POST /generate` answers at once, with no model behind it: `--chunks` SSE events, each adding
`--tokens-per-chunk` tokens (cumulative `meta_info.completion_tokens`, as SGLang streams them), the last with
finish reason `length`, then `data: [DONE]`; a non-streamed request gets the last event as one JSON body.
`GET /v1/models`, `/server_info`, `/get_server_info`, `/health` and `POST /flush_cache` answer as SGLang's do,
so that `sglang.bench_serving --backend sglang` runs against it too. Prints "ready" on stdout when listening.
It measures the clients, not a server: whatever it costs per request is the same for every client.
"""

from __future__ import annotations

import argparse
import json

from aiohttp import web

__all__ = ["main"]


def build_app(chunks: int, per_chunk: int) -> web.Application:
    events: list[bytes] = []
    for k in range(1, chunks + 1):
        n = k * per_chunk
        meta = {"id": "noop", "finish_reason": {"type": "length", "length": n} if k == chunks else None,
                "prompt_tokens": 0, "completion_tokens": n, "cached_tokens": 0}
        events.append(json.dumps({"text": " x" * n, "output_ids": [0] * n, "meta_info": meta}).encode())

    async def generate(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if not body.get("stream"):
            return web.Response(body=events[-1], content_type="application/json")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for e in events:  # one write per event: one HTTP chunk each, as a streaming server sends them
            await resp.write(b"data: " + e + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def models(_r: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "noop", "object": "model", "owned_by": "noop"}]})

    async def server_info(_r: web.Request) -> web.Response:
        return web.json_response({"version": "noop", "internal_states": [{}]})

    async def ok(_r: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/generate", generate)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/server_info", server_info)
    app.router.add_get("/get_server_info", server_info)
    app.router.add_get("/health", ok)
    app.router.add_post("/flush_cache", ok)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--chunks", type=int, default=4)
    parser.add_argument("--tokens-per-chunk", type=int, default=4)
    args = parser.parse_args()
    web.run_app(build_app(args.chunks, args.tokens_per_chunk), host="127.0.0.1", port=args.port,
                print=lambda *_: print("ready", flush=True), access_log=None)


if __name__ == "__main__":
    main()
