"""The raw record of one request, and ``requests.jsonl``: the file every workload metric is derived from.

A :class:`RequestRecord` holds what the client observed, nothing computed: when the request became due
(its planned arrival, or the moment a concurrency slot freed), when it was sent, when the response headers
came, every streamed event's arrival with the server's cumulative ``meta_info.completion_tokens``, when
``data: [DONE]`` came and when the response ended, the finish reason, the final ``meta_info`` (with the
per-request ``spec_*`` keys), and a typed failure (:class:`ErrorKind`). Times are integer nanoseconds of one
monotonic clock (``time.perf_counter_ns``) since the workload's epoch, so a record read back from the file is
bit-for-bit the record that was written and every figure derived from it recomputes exactly.

Per-request figures (TTFT, ITL, TPOT, chunk gaps) are properties computed from those fields; the run-level
metrics are :func:`harness.measure.client_side.derive_metrics`.

``requests.jsonl`` is one JSON object per line, told apart by ``kind``:

- ``workload`` (first line): the schema version, the epoch's wall-clock time, the manifest
  (:mod:`harness.records.manifest`).
- ``request``: one per request sent, written as soon as it ends (a crash keeps what came before): the record's
  fields, plus the request body (prompt ids summarised as length + sha256 unless full ids were asked for;
  always in full for a failed request, which ``repro.sh`` replays).
- ``client`` (last line, absent when the harness itself died): the client's own trace (measured-phase
  bounds, process CPU, event-loop lag samples) for :mod:`harness.measure.client_side`.
"""

from __future__ import annotations

import enum
import hashlib
import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from harness.records.manifest import Manifest
from harness.util.bounded_read import ReadRefused, iter_lines
from harness.util.errors import UserError

__all__ = [
    "JSONL_SCHEMA",
    "ClientTrace",
    "ErrorKind",
    "JsonlWriter",
    "RequestLog",
    "RequestRecord",
    "ids_digest",
    "read_manifest",
    "read_requests_jsonl",
]

JSONL_SCHEMA = 2
NS = 1_000_000_000


class ErrorKind(str, enum.Enum):
    """Why a request failed, as a type: callers decide outcomes from this, never from message words."""

    TIMEOUT = "timeout"  # the request reached the workload's request_timeout_s
    CONNECTION = "connection"  # no response headers: refused, reset or dropped before the server answered
    HTTP = "http"  # the server answered with a status other than 200
    ABORT = "abort"  # the server ended it with meta_info.finish_reason.type == "abort" (HTTP 200, SGLang's shape)
    SERVER_ERROR = "server-error"  # an in-stream {"error": ...} event (SGLang's http_server on a ValueError)
    STREAM = "stream"  # the response broke after its headers: cut before `data: [DONE]`, or not JSON
    CANCELLED = "cancelled"  # the harness stopped it: the server died, the scenario deadline, an interrupt


@dataclass(frozen=True)
class RequestRecord:
    """What happened to one request, as observed. Times: ns since the workload epoch (None: never happened).

    ``chunks`` holds every streamed event (or the one non-streamed body) as ``(arrival_ns, tokens)`` with
    ``tokens`` the server's cumulative ``completion_tokens`` after that event. Events read in one socket read
    share an arrival time. ``token_source`` says who counted: ``server`` (``meta_info.completion_tokens`` on
    every event), else ``output_ids`` or ``text`` for the events that lacked it.
    """

    index: int
    warmup: bool
    prompt_tokens: int
    stream: bool
    ok: bool
    status: int | None
    error_kind: ErrorKind | None
    error: str | None
    due_ns: int
    sent_ns: int
    written_ns: int | None  # the request's last byte written to a connected socket (after connection setup)
    headers_ns: int | None
    chunks: tuple[tuple[int, int], ...]
    done_ns: int | None
    closed_ns: int
    finish_reason: Mapping[str, Any] | None
    completion_tokens: int
    meta_info: Mapping[str, Any]
    text: str
    started_at: float  # wall clock (epoch seconds) at send, for people reading the file
    token_source: str = "server"

    # --- per-request figures, computed from the fields above ------------------------------------------------

    @property
    def content_chunks(self) -> tuple[tuple[int, int], ...]:
        """``(arrival_ns, new_tokens)`` of each event that added tokens, in order."""
        out: list[tuple[int, int]] = []
        last = 0
        for t, n in self.chunks:
            if n > last:
                out.append((t, n - last))
                last = n
        return tuple(out)

    @property
    def first_token_ns(self) -> int | None:
        c = self.content_chunks
        return c[0][0] if c else None

    @property
    def last_token_ns(self) -> int | None:
        c = self.content_chunks
        return c[-1][0] if c else None

    @property
    def ttft_s(self) -> float | None:
        """Send to the first event that carried tokens; None without streaming (no token timing is observable)."""
        first = self.first_token_ns
        return None if first is None or not self.stream else (first - self.sent_ns) / NS

    @property
    def itl_s(self) -> tuple[float, ...]:
        """One sample per token after the first event: each event's gap since the previous token-carrying
        event, divided evenly over the tokens the server says it added (several under speculative decoding)."""
        if not self.stream:
            return ()
        out: list[float] = []
        chunks = self.content_chunks
        for (t0, _), (t1, new) in itertools.pairwise(chunks):
            out.extend([(t1 - t0) / NS / new] * new)
        return tuple(out)

    @property
    def chunk_gaps_s(self) -> tuple[float, ...]:
        """One sample per token-carrying event after the first: its gap since the previous one."""
        if not self.stream:
            return ()
        chunks = self.content_chunks
        return tuple((t1 - t0) / NS for (t0, _), (t1, _) in itertools.pairwise(chunks))

    @property
    def tpot_s(self) -> float | None:
        """Time per output token excluding the first (vLLM's TPOT): (last token - first token) / (tokens - 1)."""
        first, last = self.first_token_ns, self.last_token_ns
        if not self.stream or first is None or last is None or self.completion_tokens < 2:
            return None
        return (last - first) / NS / (self.completion_tokens - 1)

    @property
    def e2e_s(self) -> float:
        """Send to the end of the response (stream closed, error, timeout or cancellation)."""
        return (self.closed_ns - self.sent_ns) / NS


@dataclass(frozen=True)
class ClientTrace:
    """The client's account of itself over the measured phase (ns since the workload epoch)."""

    measured_start_ns: int | None
    measured_end_ns: int | None
    cpu_ns: int  # user + system CPU of the harness process over the measured phase (all its threads)
    loop_lag_us: tuple[int, ...]  # oversleep of a periodic event-loop tick, measured phase only
    lag_tick_ns: int
    aborted: str | None = None


@dataclass(frozen=True)
class RequestLog:
    """A whole ``requests.jsonl``: what :func:`harness.measure.client_side.derive_metrics` needs."""

    records: tuple[RequestRecord, ...]
    manifest: Manifest | None = None
    trace: ClientTrace | None = None
    epoch_wall: float | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)


def ids_digest(ids: Sequence[int]) -> str:
    """sha256 of the ids written as decimal numbers joined by commas (stable, easy to recompute)."""
    return hashlib.sha256(",".join(str(i) for i in ids).encode()).hexdigest()


# --- the file ---------------------------------------------------------------------------------------------


def _record_fields(rec: RequestRecord) -> dict[str, Any]:
    return {
        "index": rec.index, "warmup": rec.warmup, "prompt_tokens": rec.prompt_tokens, "stream": rec.stream,
        "ok": rec.ok, "status": rec.status, "error_kind": rec.error_kind.value if rec.error_kind else None,
        "error": rec.error, "due_ns": rec.due_ns, "sent_ns": rec.sent_ns, "written_ns": rec.written_ns,
        "headers_ns": rec.headers_ns,
        "chunks": [list(c) for c in rec.chunks], "done_ns": rec.done_ns, "closed_ns": rec.closed_ns,
        "finish_reason": rec.finish_reason, "completion_tokens": rec.completion_tokens,
        "token_source": rec.token_source, "meta_info": rec.meta_info, "text": rec.text,
        "started_at": rec.started_at,
    }


def _opt_int(value: Any) -> int | None:
    """An optional time or status as read back: None, or a whole number (a string or a float is refused:
    the metrics would otherwise fail deep inside their arithmetic, far from the line at fault)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected a whole number or null, got {type(value).__name__}")
    return value


def _record(obj: Mapping[str, Any]) -> RequestRecord:
    kind = obj.get("error_kind")
    return RequestRecord(
        index=int(obj["index"]), warmup=bool(obj["warmup"]), prompt_tokens=int(obj["prompt_tokens"]),
        stream=bool(obj["stream"]), ok=bool(obj["ok"]), status=_opt_int(obj.get("status")),
        error_kind=ErrorKind(kind) if kind else None, error=obj.get("error"), due_ns=int(obj["due_ns"]),
        sent_ns=int(obj["sent_ns"]), written_ns=_opt_int(obj.get("written_ns")),
        headers_ns=_opt_int(obj.get("headers_ns")),
        chunks=tuple((int(t), int(n)) for t, n in obj.get("chunks") or ()), done_ns=_opt_int(obj.get("done_ns")),
        closed_ns=int(obj["closed_ns"]), finish_reason=obj.get("finish_reason"),
        completion_tokens=int(obj["completion_tokens"]), meta_info=dict(obj.get("meta_info") or {}),
        text=str(obj.get("text") or ""), started_at=float(obj.get("started_at") or 0.0),
        token_source=str(obj.get("token_source") or "server"),
    )


def _trace_fields(trace: ClientTrace) -> dict[str, Any]:
    return {"measured_start_ns": trace.measured_start_ns, "measured_end_ns": trace.measured_end_ns,
            "cpu_ns": trace.cpu_ns, "loop_lag_us": list(trace.loop_lag_us), "lag_tick_ns": trace.lag_tick_ns,
            "aborted": trace.aborted}


def _trace(obj: Mapping[str, Any]) -> ClientTrace:
    return ClientTrace(measured_start_ns=_opt_int(obj.get("measured_start_ns")),
                       measured_end_ns=_opt_int(obj.get("measured_end_ns")),
                       cpu_ns=int(obj["cpu_ns"]), loop_lag_us=tuple(int(x) for x in obj.get("loop_lag_us") or ()),
                       lag_tick_ns=int(obj["lag_tick_ns"]), aborted=obj.get("aborted"))


class JsonlWriter:
    """Writes ``requests.jsonl`` line by line, flushing each so a crash keeps every request that ended."""

    def __init__(self, path: Path | None, *, full_ids: bool) -> None:
        self.full_ids = full_ids
        self._fh: IO[str] | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = path.open("w", encoding="utf-8")

    def _line(self, obj: Mapping[str, Any]) -> None:
        if self._fh is not None:
            self._fh.write(json.dumps(obj, default=str) + "\n")
            self._fh.flush()

    def header(self, manifest: Manifest | None, epoch_wall: float) -> None:
        self._line({"kind": "workload", "schema": JSONL_SCHEMA, "epoch_wall": epoch_wall,
                    "manifest": manifest.to_dict() if manifest else None})

    def request(self, rec: RequestRecord, body: Mapping[str, Any]) -> None:
        if self._fh is None:
            return
        body = dict(body)
        ids = body.get("input_ids")
        if ids is not None and rec.ok and not self.full_ids:
            del body["input_ids"]
            body["input_ids_len"] = len(ids)
            body["input_ids_sha256"] = ids_digest(ids)
        self._line({"kind": "request", **_record_fields(rec), "request": body})

    def trailer(self, trace: ClientTrace) -> None:
        self._line({"kind": "client", **_trace_fields(trace)})

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def _lines(path: Path) -> Iterator[tuple[int, Any]]:
    from harness.util.bounded_read import ReadRefused, load_json, read_text  # regular file, capped, depth-capped

    text = read_text(path, "requests")
    lines = text.split("\n")
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield lineno, load_json(line, f"{path}:{lineno}")
        except ReadRefused as exc:
            if lineno == len(lines) and not text.endswith("\n") and "not JSON" in str(exc):
                return  # the partial last line of a run killed mid-write: every line before it counts
            raise UserError(f"{exc}" if "nested" in str(exc) else f"{path}:{lineno}: not a JSON line: "
                            f"{str(exc).split('not JSON ', 1)[-1]}") from None


def read_requests_jsonl(path: Path) -> RequestLog:
    """Every record of a ``requests.jsonl``, its manifest and the client's trace; UserError naming the line."""
    records: list[RequestRecord] = []
    manifest: Manifest | None = None
    trace: ClientTrace | None = None
    epoch: float | None = None
    meta: dict[str, Any] = {}
    for lineno, obj in _lines(path):
        if not isinstance(obj, Mapping):
            raise UserError(f"{path}:{lineno}: not a JSON object")
        kind = obj.get("kind")
        try:
            if kind == "workload":
                if int(obj.get("schema", 0)) > JSONL_SCHEMA:
                    raise UserError(f"{path}:{lineno}: schema {obj.get('schema')} is newer than this harness reads "
                                    f"(<= {JSONL_SCHEMA})")
                epoch = obj.get("epoch_wall")
                raw = obj.get("manifest")
                manifest = Manifest.from_dict(raw) if isinstance(raw, Mapping) else None
                meta = {k: v for k, v in obj.items() if k not in ("kind", "manifest")}
            elif kind == "request":
                records.append(_record(obj))
            elif kind == "client":
                trace = _trace(obj)
            else:
                raise UserError(f"{path}:{lineno}: kind {kind!r} is not one of workload, request, client "
                                f"(a requests.jsonl from before schema {JSONL_SCHEMA} has no raw timings)")
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise UserError(f"{path}:{lineno}: bad {kind} line: {type(exc).__name__}: {exc}") from None
    records.sort(key=lambda r: r.index)
    return RequestLog(records=tuple(records), manifest=manifest, trace=trace, epoch_wall=epoch, meta=meta)


def read_manifest(path: Path) -> Manifest | None:
    """The manifest on the first line of a ``requests.jsonl`` (or of a run folder's), or None when there is
    none (no file, an older file, a run that died before its first line)."""
    if path.is_dir():
        path = path / "requests.jsonl"
    try:
        lines = iter_lines(path, "requests")
        try:
            first = json.loads(next(lines, b"null"))
        finally:
            lines.close()  # only the first line is read: the file is closed now, not when collected
    except (OSError, ValueError, ReadRefused):
        return None
    raw = first.get("manifest") if isinstance(first, Mapping) and first.get("kind") == "workload" else None
    return Manifest.from_dict(raw) if isinstance(raw, Mapping) else None
