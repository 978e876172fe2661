"""Drive a server's native `/generate` endpoint with bounded concurrency and record every request, raw.

Phases: the first `warmup` prompts are sent first (same concurrency, no rate limit) and their records carry
`warmup=True`; the measured phase starts when they have all finished. Callers therefore pass `warmup + n`
prompts.

Arrivals: with `request_rate` None or inf (closed loop) a request is due as soon as one of the `concurrency`
slots is free; otherwise (open loop) arrival times are a Poisson process drawn from a generator seeded with
`seed`, as `sglang.bench_serving` does, laid out on an absolute schedule (no drift), and a request is due at
the later of its arrival time and the moment a slot frees. Each record keeps when it was due and when it was
actually sent: the difference is the client's own scheduling delay, which :mod:`harness.measure.client_side` reports.

What is recorded (see :mod:`harness.records.request_log`): send time, response headers time, every streamed event's
arrival with the server's cumulative `meta_info.completion_tokens`, `data: [DONE]`, the end of the response,
the finish reason, the final `meta_info`, and a typed failure. A request fails (`ok=False`) on a timeout, a
connection error, a status other than 200, an in-stream `{"error": ...}` event, a stream cut before
`data: [DONE]`, and also when the server ends it with `meta_info.finish_reason.type == "abort"`: SGLang
streams an aborted request as a final chunk carrying that finish reason, then `data: [DONE]`, with HTTP 200
(sglang `srt/managers/tokenizer_manager.py` `_handle_abort_req` 0.5.14:2662 / 0.5.15:2695 and
`_handle_abort_finish_reason` 0.5.14:1381 / 0.5.15:1402; `srt/entrypoints/http_server.py` `generate_request`,
`data: [DONE]` after the last chunk, 0.5.14:769-797 / 0.5.15:790-826). A non-streamed aborted request without a
status code also answers 200 with that finish reason.

Abort: `should_abort` is polled every `ABORT_POLL_S`; when it returns a reason every in-flight request is
cancelled, its record says `aborted: <reason>` with kind `cancelled`, and the result carries the reason.
Requests never sent are not recorded. The same poll measures event-loop lag (its oversleep) during the
measured phase.

Every request sent gets one `requests.jsonl` line as soon as it finishes, after a first line with the
manifest and before a last line with the client's trace.
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import aiohttp

from harness.records.manifest import Manifest, build_manifest
from harness.records.request_log import (
    NS,
    ClientTrace,
    ErrorKind,
    JsonlWriter,
    RequestRecord,
    ids_digest,
)
from harness.util.errors import UserError
from harness.workload.prompts import Prompt

__all__ = [
    "ABORT_POLL_S",
    "TEXT_LIMIT",
    "ErrorKind",
    "RequestRecord",
    "WorkloadResult",
    "ids_digest",
    "request_body",
    "run_workload",
    "run_workload_sync",
]

log = logging.getLogger(__name__)

ABORT_POLL_S = 0.02
TEXT_LIMIT = 2000
# After cancelling in-flight requests on abort, how long to wait for them to unwind before moving on.
_ABORT_GRACE_S = 0.5


@dataclass(frozen=True)
class WorkloadResult:
    records: tuple[RequestRecord, ...]
    measured_wall_s: float
    aborted: str | None
    manifest: Manifest | None = None
    trace: ClientTrace | None = None
    epoch_wall: float | None = None


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


def _truncate(text: str) -> str:
    if len(text) <= TEXT_LIMIT:
        return text
    return text[:TEXT_LIMIT] + f"...[{len(text) - TEXT_LIMIT} more chars]"


class _Clock:
    """Integer nanoseconds since the workload's epoch, on the monotonic high-resolution clock."""

    def __init__(self) -> None:
        self.epoch = time.perf_counter_ns()
        self.epoch_wall = time.time()

    def now(self) -> int:
        return time.perf_counter_ns() - self.epoch


@dataclass
class _Partial:
    """Mutable state of one request while it runs; survives a timeout or a cancellation."""

    index: int
    warmup: bool
    prompt: Prompt
    body: dict
    stream: bool
    due_ns: int
    sent_ns: int
    started_at: float
    status: int | None = None
    error_kind: ErrorKind | None = None
    error: str | None = None
    written_ns: int | None = None
    headers_ns: int | None = None
    done_ns: int | None = None
    chunks: list[tuple[int, int]] = field(default_factory=list)
    completion_tokens: int = 0
    finish_reason: dict | None = None
    meta_info: dict = field(default_factory=dict)
    text: str = ""
    token_source: str = "server"

    def fail(self, kind: ErrorKind, message: str) -> None:
        if self.error_kind is None:  # the first failure is the cause; later ones are its consequences
            self.error_kind, self.error = kind, message[:500]

    def on_event(self, obj: dict, now: int) -> None:
        if "error" in obj:
            self.fail(ErrorKind.SERVER_ERROR, f"server error: {json.dumps(obj['error'])[:500]}")
        meta = obj.get("meta_info")
        if isinstance(meta, dict):
            self.meta_info = meta
            finish = meta.get("finish_reason")
            if isinstance(finish, dict):
                self.finish_reason = finish
                if finish.get("type") == "abort":
                    code = finish.get("status_code")
                    self.fail(ErrorKind.ABORT, f"server aborted the request: {finish.get('message', '')}"
                                               + (f" (status_code {code})" if code is not None else ""))
        text = obj.get("text")
        n = meta.get("completion_tokens") if isinstance(meta, dict) else None
        if not isinstance(n, int) or isinstance(n, bool):
            ids = obj.get("output_ids")
            if "error" in obj and not isinstance(ids, list):
                n = self.completion_tokens  # an error event adds no tokens
            else:
                # Without the server's count: cumulative output_ids if present, else one token per changed text.
                self.token_source = "output_ids" if isinstance(ids, list) else "text"
                n = len(ids) if isinstance(ids, list) else self.completion_tokens + (text not in (None, self.text))
        if isinstance(text, str):
            self.text = text
        self.chunks.append((now, n))
        self.completion_tokens = max(self.completion_tokens, n)

    def record(self, end: int) -> RequestRecord:
        ok = self.error_kind is None and self.done_ns is not None and self.status == 200
        return RequestRecord(
            index=self.index, warmup=self.warmup, prompt_tokens=self.prompt.tokens, stream=self.stream, ok=ok,
            status=self.status, error_kind=self.error_kind, error=self.error, due_ns=self.due_ns,
            sent_ns=self.sent_ns, written_ns=self.written_ns, headers_ns=self.headers_ns, chunks=tuple(self.chunks),
            done_ns=self.done_ns,
            closed_ns=end, finish_reason=self.finish_reason, completion_tokens=self.completion_tokens,
            meta_info=dict(self.meta_info), text=_truncate(self.text), started_at=self.started_at,
            token_source=self.token_source,
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



class _Runner:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        *,
        clock: _Clock,
        concurrency: int,
        request_timeout_s: float,
        stream: bool,
        body_args: dict[str, Any],
        writer: JsonlWriter,
        progress: _Progress,
        decoding: asyncio.Event | None = None,
    ) -> None:
        self.session = session
        self.url = base_url.rstrip("/") + "/generate"
        self.clock = clock
        # One token per concurrency slot, carrying the time it was freed: a request is due when its slot frees.
        self.slots: asyncio.Queue[int] = asyncio.Queue()
        for _ in range(concurrency):
            self.slots.put_nowait(0)
        self.timeout = request_timeout_s
        self.stream = stream
        self.body_args = body_args
        self.writer = writer
        self.progress = progress
        self.records: dict[int, RequestRecord] = {}
        self.inflight: dict[int, _Partial] = {}
        self.tasks: set[asyncio.Task] = set()
        self.abort_reason: str | None = None
        self.measured_start: int | None = None
        self.measured_end: int | None = None
        self.cpu_start_ns = 0
        self.cpu_ns = 0
        self.loop_lag_us: list[int] = []
        # Set once every measured request has streamed a token or ended (see run_workload's ``decoding``).
        self.decoding = decoding
        self.awaiting_first_token: set[int] = set()

    @property
    def measuring(self) -> bool:
        return self.measured_start is not None and self.measured_end is None

    async def drive(self, prompts: Sequence[Prompt], warmup: int, rate: float | None, seed: int) -> None:
        self.awaiting_first_token = set(range(warmup, len(prompts)))
        await self._phase(prompts[:warmup], 0, warmup=True, rate=None, seed=seed)
        self.cpu_start_ns = time.process_time_ns()
        self.measured_start = self.clock.now()
        await self._phase(prompts[warmup:], warmup, warmup=False, rate=rate, seed=seed)
        self.stop_measuring()

    def first_token(self, index: int) -> None:
        """Request ``index`` streamed a token or ended: when none is left waiting, say the phase is decoding."""
        self.awaiting_first_token.discard(index)
        if not self.awaiting_first_token and self.decoding is not None:
            self.decoding.set()

    def stop_measuring(self) -> None:
        if self.measured_start is not None and self.measured_end is None:
            self.measured_end = self.clock.now()
            self.cpu_ns = time.process_time_ns() - self.cpu_start_ns

    async def _phase(
        self, prompts: Sequence[Prompt], first: int, *, warmup: bool, rate: float | None, seed: int
    ) -> None:
        rng = random.Random(seed)
        planned = self.clock.now()
        tasks = []
        for k, prompt in enumerate(prompts):
            if k and rate is not None and math.isfinite(rate):
                planned += int(rng.expovariate(rate) * NS)
                wait = planned - self.clock.now()
                if wait > 0:
                    await asyncio.sleep(wait / NS)
            freed = await self.slots.get()
            task = asyncio.create_task(self._one(first + k, prompt, warmup, max(planned, freed)))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            tasks.append(task)
        await asyncio.gather(*tasks)

    async def _one(self, index: int, prompt: Prompt, warmup: bool, due: int) -> None:
        try:
            body = request_body(prompt, stream=self.stream, **self.body_args)
            p = _Partial(index, warmup, prompt, body, self.stream, due_ns=due, sent_ns=self.clock.now(),
                         started_at=time.time())
            self.inflight[index] = p
            try:
                await asyncio.wait_for(self._send(p), self.timeout)
            except asyncio.TimeoutError:
                p.fail(ErrorKind.TIMEOUT, f"request timed out after {self.timeout:g} s")
            except aiohttp.ClientError as exc:
                # Before the headers: the server could not be reached or hung up; after: the stream broke.
                kind = ErrorKind.CONNECTION if p.headers_ns is None else ErrorKind.STREAM
                p.fail(kind, f"{type(exc).__name__}: {exc}")
            except (ValueError, TypeError) as exc:  # a body that is not JSON, or an event that is not an object
                p.fail(ErrorKind.STREAM, f"{type(exc).__name__}: {exc}")
            del self.inflight[index]
            self.finish(p)
        finally:
            self.slots.put_nowait(self.clock.now())

    def finish(self, p: _Partial) -> None:
        self.first_token(p.index)
        rec = p.record(self.clock.now())
        self.records[p.index] = rec
        self.writer.request(rec, p.body)
        self.progress.update(rec.ok)

    async def _send(self, p: _Partial) -> None:
        async with self.session.post(self.url, json=p.body, trace_request_ctx=p) as resp:
            p.headers_ns = self.clock.now()
            p.status = resp.status
            if resp.status != 200:
                detail = (await resp.text(errors="replace"))[:300]
                p.fail(ErrorKind.HTTP, f"HTTP {resp.status}: {detail}")
                return
            if not self.stream:
                data = await resp.json(content_type=None)
                if not isinstance(data, dict):
                    raise TypeError(f"expected a JSON object, got {type(data).__name__}")
                p.on_event(data, self.clock.now())
                p.done_ns = self.clock.now()
                return
            buf = b""
            # Read to the end of the response, past `data: [DONE]`: the close is part of the record.
            async for chunk in resp.content.iter_any():
                now = self.clock.now()
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    self._sse_line(p, line, now)
                if p.completion_tokens and p.index in self.awaiting_first_token:
                    self.first_token(p.index)
            if buf:
                self._sse_line(p, buf, self.clock.now())
            if p.done_ns is None:
                p.fail(ErrorKind.STREAM, "stream ended before 'data: [DONE]'")

    @staticmethod
    def _sse_line(p: _Partial, line: bytes, now: int) -> None:
        line = line.strip()
        if not line.startswith(b"data:") or p.done_ns is not None:
            return  # blank separators, comments, other SSE fields; anything after [DONE]
        payload = line[5:].strip()
        if payload == b"[DONE]":
            p.done_ns = now
            return
        obj = json.loads(payload)
        if not isinstance(obj, dict):
            raise TypeError(f"SSE event is not a JSON object: {payload[:100]!r}")
        p.on_event(obj, now)


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


def _prompts_digest(prompts: Sequence[Prompt]) -> str:
    h = hashlib.sha256()
    for p in prompts:
        h.update((ids_digest(p.input_ids) if p.input_ids is not None else f"text:{p.text}").encode() + b"\n")
    return h.hexdigest()[:16]


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
    headers: Mapping[str, str] | None = None,
    decoding: asyncio.Event | None = None,
) -> WorkloadResult:
    """Send `prompts` (the first `warmup` of them as warmup) and return one record per request sent.

    `progress`: None draws a bar only when stderr is a terminal; True always; False never. `headers` go with
    every request (a server's API key: ``harness.server.auth``), never to `requests.jsonl`. `decoding` is set once
    every measured request has streamed a token or ended (a phase that joins this one starts then).
    """
    _validate(prompts, concurrency, request_rate, warmup, request_timeout_s, max_new_tokens)
    manifest = build_manifest(
        prompt_tokens=[p.tokens for p in prompts[warmup:]], prompt_digest=_prompts_digest(prompts), warmup=warmup,
        concurrency=concurrency, request_rate=request_rate, max_new_tokens=max_new_tokens, temperature=temperature,
        ignore_eos=ignore_eos, stream=stream)
    clock = _Clock()
    writer = JsonlWriter(jsonl_path, full_ids=jsonl_full_ids)
    writer.header(manifest, clock.epoch_wall)
    bar = _Progress(len(prompts), sys.stderr if (sys.stderr.isatty() if progress is None else progress) else None)
    # No connector limit (the slots bound it); no proxies for 127.0.0.1 (trust_env off); no 300 s session cut.
    connector = aiohttp.TCPConnector(limit=0)
    no_timeout = aiohttp.ClientTimeout(total=None)
    runner: _Runner | None = None
    try:
        async with aiohttp.ClientSession(connector=connector, timeout=no_timeout, trust_env=False,
                                         headers=dict(headers or {}), trace_configs=[_wire_trace(clock)]) as session:
            runner = _Runner(
                session, base_url, clock=clock, concurrency=concurrency, request_timeout_s=request_timeout_s,
                stream=stream, body_args={"max_new_tokens": max_new_tokens, "ignore_eos": ignore_eos,
                                          "temperature": temperature},
                writer=writer, progress=bar, decoding=decoding,
            )
            await _supervise(runner, runner.drive(prompts, warmup, request_rate, seed), should_abort)
    finally:
        bar.close()
        if runner is not None:
            runner.stop_measuring()
            writer.trailer(_trace(runner))
        writer.close()
    start, end = runner.measured_start, runner.measured_end
    wall = 0.0 if start is None or end is None else (end - start) / NS
    records = tuple(runner.records[i] for i in sorted(runner.records))
    return WorkloadResult(records=records, measured_wall_s=wall, aborted=runner.abort_reason, manifest=manifest,
                          trace=_trace(runner), epoch_wall=clock.epoch_wall)


def _wire_trace(clock: _Clock) -> aiohttp.TraceConfig:
    """Marks when each request's bytes were written to a connected socket (after any connection setup)."""
    trace = aiohttp.TraceConfig()

    async def written(_session: Any, ctx: Any, _params: Any) -> None:
        partial = ctx.trace_request_ctx
        if isinstance(partial, _Partial):
            partial.written_ns = clock.now()  # the last write of the request (headers, then body chunks)

    trace.on_request_headers_sent.append(written)
    trace.on_request_chunk_sent.append(written)
    return trace


def _trace(runner: _Runner) -> ClientTrace:
    return ClientTrace(measured_start_ns=runner.measured_start, measured_end_ns=runner.measured_end,
                       cpu_ns=runner.cpu_ns, loop_lag_us=tuple(runner.loop_lag_us),
                       lag_tick_ns=int(ABORT_POLL_S * NS), aborted=runner.abort_reason)


async def _supervise(runner: _Runner, drive: Any, should_abort: Callable[[], str | None]) -> None:
    """Run `drive` while polling `should_abort`; on a reason, cancel everything in flight and record it.

    The poll doubles as the event-loop lag probe: how much later than asked each tick wakes up."""
    main = asyncio.create_task(drive)
    tick_ns = int(ABORT_POLL_S * NS)

    async def watch() -> str | None:
        while not main.done():
            reason = should_abort()
            if reason:
                return reason
            before = time.perf_counter_ns()
            await asyncio.sleep(ABORT_POLL_S)
            if runner.measuring:
                runner.loop_lag_us.append(max(0, time.perf_counter_ns() - before - tick_ns) // 1000)
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
                # The cancellation is the cause, whatever the request saw before it.
                partial.error_kind, partial.error = ErrorKind.CANCELLED, f"aborted: {reason}"
                runner.finish(partial)
            runner.inflight.clear()


def run_workload_sync(*args: Any, **kwargs: Any) -> WorkloadResult:
    """`run_workload` for callers without an event loop."""
    return asyncio.run(run_workload(*args, **kwargs))
