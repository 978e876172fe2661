"""Drive a server's native `/generate` endpoint with bounded concurrency and record every request.

Phases: the first `warmup` prompts are sent first (same concurrency, no rate limit) and their records carry
`warmup=True`; the measured phase starts when they have all finished, and `measured_wall_s` covers only it.
Callers therefore pass `warmup + n` prompts.

Arrivals: with `request_rate` None or inf every request is released at once and only the concurrency bound
holds them back; otherwise gaps between releases are exponential (a Poisson process) drawn from a generator
seeded with `seed`, as `sglang.bench_serving` does. A request's clock (TTFT, end-to-end, its timeout) starts
when it is actually sent, after it got a concurrency slot.

Latency semantics follow `sglang.bench_serving`: TTFT is the time to the first streamed event that carries
tokens; after that, each event's gap since the previous token-carrying event is divided evenly over the
tokens it carries (speculative decoding sends several per event), giving one ITL sample per token. Events
that add no tokens are ignored. Token counts come from the cumulative `meta_info.completion_tokens`.

Abort: `should_abort` is polled every `ABORT_POLL_S`; when it returns a reason every in-flight request is
cancelled, its record says `aborted: <reason>`, and the result carries the reason. Requests never sent are
not recorded.

Every request sent gets one JSONL line as soon as it finishes (so a crash keeps what came before): the body
(prompt ids summarised as length + sha256 unless `jsonl_full_ids`; always in full for failed requests, which
`repro.sh` replays) and the status, error, timings and `meta_info`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import aiohttp

from harness.errors import UserError
from harness.prompts import Prompt

__all__ = [
    "RequestRecord",
    "WorkloadResult",
    "run_workload",
    "run_workload_sync",
    "request_body",
    "ids_digest",
    "ABORT_POLL_S",
    "TEXT_LIMIT",
]

log = logging.getLogger(__name__)

ABORT_POLL_S = 0.02
TEXT_LIMIT = 2000
# After cancelling in-flight requests on abort, how long to wait for them to unwind before moving on.
_ABORT_GRACE_S = 0.5


@dataclass(frozen=True)
class RequestRecord:
    """What happened to one request. Times in seconds; `started_at` is wall-clock (epoch) at send."""

    index: int
    warmup: bool
    prompt_tokens: int
    ok: bool
    status: int | None
    error: str | None
    ttft_s: float | None
    itl_s: tuple[float, ...]
    e2e_s: float | None
    completion_tokens: int
    meta_info: dict
    text: str
    started_at: float


@dataclass(frozen=True)
class WorkloadResult:
    records: tuple[RequestRecord, ...]
    measured_wall_s: float
    aborted: str | None


def request_body(
    prompt: Prompt, *, max_new_tokens: int, ignore_eos: bool, temperature: float, stream: bool
) -> dict[str, Any]:
    """The JSON body of SGLang's native `POST /generate` for one prompt."""
    body: dict[str, Any] = {}
    if prompt.input_ids is not None:
        body["input_ids"] = list(prompt.input_ids)
    else:
        body["text"] = prompt.text
    body["sampling_params"] = {
        "max_new_tokens": max_new_tokens,
        "temperature": temperature,
        "ignore_eos": ignore_eos,
    }
    body["stream"] = stream
    return body


def ids_digest(ids: Sequence[int]) -> str:
    """sha256 of the ids written as decimal numbers joined by commas (stable, easy to recompute)."""
    return hashlib.sha256(",".join(str(i) for i in ids).encode()).hexdigest()


def _truncate(text: str) -> str:
    if len(text) <= TEXT_LIMIT:
        return text
    return text[:TEXT_LIMIT] + f"...[{len(text) - TEXT_LIMIT} more chars]"


@dataclass
class _Partial:
    """Mutable state of one request while it runs; survives a timeout or a cancellation."""

    index: int
    warmup: bool
    prompt: Prompt
    body: dict
    started_at: float
    t0: float
    status: int | None = None
    error: str | None = None
    done: bool = False
    ttft_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    completion_tokens: int = 0
    meta_info: dict = field(default_factory=dict)
    text: str = ""
    last_token_t: float = 0.0

    def on_event(self, obj: dict, now: float) -> None:
        if "error" in obj and self.error is None:
            self.error = f"server error: {json.dumps(obj['error'])[:500]}"
        meta = obj.get("meta_info")
        if isinstance(meta, dict):
            self.meta_info = meta
        text = obj.get("text")
        n = self.meta_info.get("completion_tokens") if isinstance(meta, dict) else None
        if not isinstance(n, int):
            ids = obj.get("output_ids")
            # Without a count: cumulative output_ids if present, else one token per changed text.
            n = len(ids) if isinstance(ids, list) else self.completion_tokens + (text not in (None, self.text))
        if isinstance(text, str):
            self.text = text
        new = n - self.completion_tokens
        if new <= 0:
            return
        if self.ttft_s is None:
            self.ttft_s = now - self.t0
        else:
            gap = now - self.last_token_t
            self.itl_s.extend([gap / new] * new)
        self.last_token_t = now
        self.completion_tokens = n

    def record(self, end: float, *, error: str | None = None) -> RequestRecord:
        err = error or self.error
        return RequestRecord(
            index=self.index,
            warmup=self.warmup,
            prompt_tokens=self.prompt.tokens,
            ok=err is None and self.done and self.status == 200,
            status=self.status,
            error=err,
            ttft_s=self.ttft_s,
            itl_s=tuple(self.itl_s),
            e2e_s=end - self.t0,
            completion_tokens=self.completion_tokens,
            meta_info=dict(self.meta_info),
            text=_truncate(self.text),
            started_at=self.started_at,
        )


class _Progress:
    """A one-line progress bar on a terminal; redrawn at most every 0.1 s."""

    def __init__(self, total: int, stream: IO[str] | None) -> None:
        self.total, self.stream = total, stream
        self.done = self.failed = 0
        self._last = 0.0

    def update(self, ok: bool) -> None:
        self.done += 1
        self.failed += not ok
        now = time.monotonic()
        if self.stream is not None and (now - self._last >= 0.1 or self.done == self.total):
            self._last = now
            self._draw()

    def _draw(self) -> None:
        assert self.stream is not None
        width = 30
        filled = width * self.done // max(self.total, 1)
        self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} failed {self.failed}")
        self.stream.flush()

    def close(self) -> None:
        if self.stream is not None and self.done:
            self.stream.write("\n")
            self.stream.flush()


class _JsonlWriter:
    def __init__(self, path: Path | None, full_ids: bool) -> None:
        self.full_ids = full_ids
        self._fh: IO[str] | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = path.open("w", encoding="utf-8")

    def write(self, partial: _Partial, rec: RequestRecord) -> None:
        if self._fh is None:
            return
        body = dict(partial.body)
        ids = body.get("input_ids")
        if ids is not None and rec.ok and not self.full_ids:
            del body["input_ids"]
            body["input_ids_len"] = len(ids)
            body["input_ids_sha256"] = ids_digest(ids)
        line = {
            "index": rec.index,
            "warmup": rec.warmup,
            "started_at": rec.started_at,
            "request": body,
            "ok": rec.ok,
            "status": rec.status,
            "error": rec.error,
            "ttft_s": rec.ttft_s,
            "e2e_s": rec.e2e_s,
            "completion_tokens": rec.completion_tokens,
            "itl_s": [round(x, 6) for x in rec.itl_s],
            "meta_info": rec.meta_info,
            "text": rec.text,
        }
        self._fh.write(json.dumps(line, default=str) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


class _Runner:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        *,
        concurrency: int,
        request_timeout_s: float,
        stream: bool,
        body_args: dict[str, Any],
        writer: _JsonlWriter,
        progress: _Progress,
    ) -> None:
        self.session = session
        self.url = base_url.rstrip("/") + "/generate"
        self.sem = asyncio.Semaphore(concurrency)
        self.timeout = request_timeout_s
        self.stream = stream
        self.body_args = body_args
        self.writer = writer
        self.progress = progress
        self.records: dict[int, RequestRecord] = {}
        self.inflight: dict[int, _Partial] = {}
        self.tasks: set[asyncio.Task] = set()
        self.abort_reason: str | None = None
        self.measured_start: float | None = None
        self.measured_end: float | None = None

    async def drive(self, prompts: Sequence[Prompt], warmup: int, rate: float | None, seed: int) -> None:
        await self._phase(prompts[:warmup], 0, warmup=True, rate=None, seed=seed)
        self.measured_start = time.perf_counter()
        await self._phase(prompts[warmup:], warmup, warmup=False, rate=rate, seed=seed)
        self.measured_end = time.perf_counter()

    async def _phase(
        self, prompts: Sequence[Prompt], first: int, *, warmup: bool, rate: float | None, seed: int
    ) -> None:
        rng = random.Random(seed)
        tasks = []
        for k, prompt in enumerate(prompts):
            if k and rate is not None and math.isfinite(rate):
                await asyncio.sleep(rng.expovariate(rate))
            task = asyncio.create_task(self._one(first + k, prompt, warmup))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            tasks.append(task)
        await asyncio.gather(*tasks)

    async def _one(self, index: int, prompt: Prompt, warmup: bool) -> None:
        async with self.sem:
            body = request_body(prompt, stream=self.stream, **self.body_args)
            p = _Partial(index, warmup, prompt, body, started_at=time.time(), t0=time.perf_counter())
            self.inflight[index] = p
            try:
                await asyncio.wait_for(self._send(p), self.timeout)
            except asyncio.TimeoutError:
                p.error = f"request timed out after {self.timeout:g} s"
            except (aiohttp.ClientError, ValueError) as exc:
                # ClientError: connection refused/reset (a dying server); ValueError: a malformed body.
                p.error = f"{type(exc).__name__}: {exc}"[:500]
            del self.inflight[index]
            self.finish(p)

    def finish(self, p: _Partial, *, error: str | None = None) -> None:
        rec = p.record(time.perf_counter(), error=error)
        self.records[p.index] = rec
        self.writer.write(p, rec)
        self.progress.update(rec.ok)

    async def _send(self, p: _Partial) -> None:
        async with self.session.post(self.url, json=p.body) as resp:
            p.status = resp.status
            if resp.status != 200:
                detail = (await resp.text(errors="replace"))[:300]
                p.error = f"HTTP {resp.status}: {detail}"
                return
            if not self.stream:
                data = await resp.json(content_type=None)
                if not isinstance(data, dict):
                    raise ValueError(f"expected a JSON object, got {type(data).__name__}")
                p.on_event(data, time.perf_counter())
                # Non-streaming: no token timing is observable, only end-to-end.
                p.ttft_s = None
                p.done = True
                return
            buf = b""
            async for chunk in resp.content.iter_any():
                buf += chunk
                while b"\n" in buf and not p.done:
                    line, buf = buf.split(b"\n", 1)
                    self._sse_line(p, line)
                if p.done:
                    return
            if buf:
                self._sse_line(p, buf)
            if not p.done:
                p.error = p.error or "stream ended before 'data: [DONE]'"

    @staticmethod
    def _sse_line(p: _Partial, line: bytes) -> None:
        line = line.strip()
        if not line.startswith(b"data:"):
            return  # blank separators, comments, other SSE fields
        payload = line[5:].strip()
        if payload == b"[DONE]":
            p.done = True
            return
        obj = json.loads(payload)
        if not isinstance(obj, dict):
            raise ValueError(f"SSE event is not a JSON object: {payload[:100]!r}")
        p.on_event(obj, time.perf_counter())


def _validate(
    prompts: Sequence[Prompt], concurrency: int, request_rate: float | None, warmup: int, timeout: float,
    max_new_tokens: int,
) -> None:
    if concurrency < 1:
        raise UserError(f"workload concurrency is {concurrency}: must be >= 1")
    if request_rate is not None and not request_rate > 0:
        raise UserError(f"workload request_rate is {request_rate}: must be > 0, or inf / unset for no limit")
    if warmup < 0:
        raise UserError(f"workload warmup is {warmup}: must be >= 0")
    if len(prompts) <= warmup:
        raise UserError(f"workload has {len(prompts)} prompts for {warmup} warmup requests: none left to measure")
    if not timeout > 0:
        raise UserError(f"workload request_timeout_s is {timeout}: must be > 0")
    if max_new_tokens < 1:
        raise UserError(f"workload max_new_tokens is {max_new_tokens}: must be >= 1")


async def run_workload(
    base_url: str,
    prompts: Sequence[Prompt],
    *,
    concurrency: int,
    request_rate: float | None,
    max_new_tokens: int,
    ignore_eos: bool,
    temperature: float,
    stream: bool,
    warmup: int,
    request_timeout_s: float,
    jsonl_path: Path | None,
    should_abort: Callable[[], str | None] = lambda: None,
    seed: int = 0,
    progress: bool | None = None,
    jsonl_full_ids: bool = False,
) -> WorkloadResult:
    """Send `prompts` (the first `warmup` of them as warmup) and return one record per request sent.

    `progress`: None draws a bar only when stderr is a terminal; True always; False never.
    """
    _validate(prompts, concurrency, request_rate, warmup, request_timeout_s, max_new_tokens)
    draw = sys.stderr.isatty() if progress is None else progress
    writer = _JsonlWriter(jsonl_path, jsonl_full_ids)
    bar = _Progress(len(prompts), sys.stderr if draw else None)
    # No connector limit (the semaphore is the bound); trust_env off so proxies never see 127.0.0.1 traffic.
    # aiohttp's default 300 s session timeout would cut long generations: the per-request bound is ours.
    connector = aiohttp.TCPConnector(limit=0)
    no_timeout = aiohttp.ClientTimeout(total=None)
    try:
        async with aiohttp.ClientSession(connector=connector, timeout=no_timeout, trust_env=False) as session:
            runner = _Runner(
                session,
                base_url,
                concurrency=concurrency,
                request_timeout_s=request_timeout_s,
                stream=stream,
                body_args={"max_new_tokens": max_new_tokens, "ignore_eos": ignore_eos, "temperature": temperature},
                writer=writer,
                progress=bar,
            )
            await _supervise(runner, runner.drive(prompts, warmup, request_rate, seed), should_abort)
    finally:
        bar.close()
        writer.close()
    start, end = runner.measured_start, runner.measured_end
    wall = 0.0 if start is None else (end if end is not None else time.perf_counter()) - start
    records = tuple(runner.records[i] for i in sorted(runner.records))
    return WorkloadResult(records=records, measured_wall_s=wall, aborted=runner.abort_reason)


async def _supervise(runner: _Runner, drive: Any, should_abort: Callable[[], str | None]) -> None:
    """Run `drive` while polling `should_abort`; on a reason, cancel everything in flight and record it."""
    main = asyncio.create_task(drive)

    async def watch() -> str | None:
        while not main.done():
            reason = should_abort()
            if reason:
                return reason
            await asyncio.sleep(ABORT_POLL_S)
        return None

    watcher = asyncio.create_task(watch())
    try:
        await asyncio.wait({main, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if watcher.done():
            runner.abort_reason = watcher.result()  # re-raises a bug in should_abort
        if runner.abort_reason is None:
            await main  # re-raises a bug in the driver rather than hiding it
        else:
            log.info("workload aborted: %s", runner.abort_reason)
    finally:
        watcher.cancel()
        if not main.done() or runner.abort_reason is not None:
            pending = {main, *runner.tasks}
            for task in pending:
                task.cancel()
            await asyncio.wait(pending, timeout=_ABORT_GRACE_S)
            reason = runner.abort_reason or "workload interrupted"
            for partial in list(runner.inflight.values()):
                runner.finish(partial, error=f"aborted: {reason}")
            runner.inflight.clear()


def run_workload_sync(*args: Any, **kwargs: Any) -> WorkloadResult:
    """`run_workload` for callers without an event loop."""
    return asyncio.run(run_workload(*args, **kwargs))
