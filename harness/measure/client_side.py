"""Every workload metric, derived from the raw request records by one function: :func:`derive_metrics`.

The input is what ``requests.jsonl`` holds (:mod:`harness.records.request_log`): per request the send time, the
response headers time, each streamed event's arrival with the server's cumulative ``completion_tokens``, the
end of the response, the finish reason and ``meta_info``; per run the manifest and the client's trace. The
function is pure, and times are integer nanoseconds, so ``sglang-repro metrics RUN_DIR`` recomputes a result's
numbers exactly from its artifacts.

Which requests count. Warm-up requests never count. "Measured" are the others; "ok" are the measured ones
that ended normally (HTTP 200, ``data: [DONE]``, a finish reason that is not ``abort``).

Throughput, two windows (output tokens are the ok requests' ``completion_tokens``, counted by the server):

- full: from the first measured request sent to the last token received by any measured request. "Sent" is
  when the request's last byte was written to a connected socket (``written_ns``, from aiohttp's request
  tracing), so connection setup is not in the window; "received" is the arrival of the last token-carrying
  event (not the stream close). Measured this way the window is within 1% of the reference server's own
  served span (``/sim/stats`` ``span_s``, first arrival to last finish) on 10 short requests and at 64
  simultaneous connections (``tests/test_measure.py``); measured from before connection setup it read
  2.5-3.8% (10 requests) and 1.3-1.7% (64 connections) low.
  ``output_throughput_tok_s`` = tokens / window, ``request_throughput_rps`` = ok requests / window.
- steady (``*_steady``): ramp-up and drain removed. It starts when the K-th measured request is sent, with
  K = min(concurrency, measured) in a closed loop (every slot busy from then on) and K = ceil(10% of measured)
  in an open loop, and ends when the last measured request is sent (after that the load only drains). The
  tokens are those of ok requests whose events arrived inside the window. None when the window is empty
  (e.g. all requests sent at once).

Latency, with vLLM's names and definitions (``vllm bench serve``) unless said otherwise; streaming only:

- ``ttft``: send to the first event that carried tokens.
- ``tpot``: per request, (last token's arrival - first token's arrival) / (completion_tokens - 1): time per
  output token excluding the first. vLLM takes the end of the response instead of the last token; the gap
  between them is the stream close, reported on its own (``close_ms``).
- ``itl``: per token, as ``sglang.bench_serving`` does it (0.5.15 ``benchmark/serving.py:720-725``): each
  event's gap since the previous token-carrying event divided evenly over the tokens the server says it added.
  Never from re-tokenizing text, which is wrong when one event carries several tokens (speculative decoding).
- ``chunk_latency``: per event, the gap itself (what vLLM calls ITL; the same as ``itl`` at one token per event).
- ``tokens_per_chunk``: tokens added per token-carrying event after the first, pooled.
- ``e2e``: send to the end of the response.

Acceptance length, three figures that are never compared with one another (:data:`ACCEPT_LENGTH_SOURCES`):

- ``accept_length``: from the measured ok requests' own ``meta_info`` (SGLang's per-request
  ``spec_accept_length = completion_tokens / spec_verify_ct``, bonus token included; sglang
  ``srt/managers/tokenizer_manager.py`` ``_calculate_spec_decoding_metrics`` 0.5.14:2301 / 0.5.15:2334), token
  weighted: sum of completion tokens over sum of verify steps. Probe and warm-up requests and other tenants'
  traffic are not in it.
- ``accept_length_server`` (``/server_info``, since the last flush, folded every 40 decode batches) and
  ``accept_length_gauge`` (``/metrics``): read from
  the server by :mod:`harness.measure.server_side`, not derived here.

Cross-check: ``accept_length_chunks`` = sum of completion tokens / sum of (token-carrying events - 1) over the
same requests, measured on the client. SGLang streams the prefill's token alone, then one event per verify
step, so the two agree when every step reached the client as its own event. They drift apart when events
coalesce (a client or tokenizer manager that fell behind drains several steps into one event:
``tokenizer_manager.py`` ``_wait_one_response``, ``out = out_list[-1]`` 0.5.14:1471 / 0.5.15:1492) or when a
server streams every N steps.
A relative difference beyond :data:`ACCEPT_LENGTH_TOLERANCE` sets ``accept_length_chunks_disagree`` to 1.

The client proves itself:

- ``sched_delay_ms_*``: per measured request, sent - due (due: its planned arrival, or the moment a
  concurrency slot freed, whichever is later): how late the client's own loop was.
- ``loop_lag_ms_*``: oversleep of a 20 ms event-loop tick during the measured phase.
- ``client_cpu_fraction``: CPU seconds of the harness process (all threads) per second of the measured phase.
- ``achieved_rate_rps`` ((measured - 1) / (last send - first due time)) vs ``requested_rate_rps``
  (None: unlimited), ``achieved_concurrency_mean`` (request
  seconds in flight per second of the full window) and ``concurrency_max`` vs ``requested_concurrency``.
- ``client_fell_behind``: 1 when the p99 scheduling delay passed :data:`CLIENT_BEHIND_MS`: the client sent
  its requests late, so the load it applied was not the load asked for; such a run's metrics say more about
  the client than the server and are not compared (:func:`not_comparable`). Loop lag is reported beside it
  as the likely cause, not as a criterion: a loaded machine oversleeps a 20 ms tick by several ms while
  requests still leave on time.

Percentiles interpolate linearly between order statistics (numpy's default).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from harness.records.manifest import Manifest
from harness.records.metric_definitions import (
    ACCEPT_LENGTH,
    ACCEPT_LENGTH_BY_SOURCE,
    OUTPUT_THROUGHPUT,
    REQUEST_THROUGHPUT,
    REQUESTS_FAILED,
    REQUESTS_OK,
)
from harness.records.request_log import NS, ClientTrace, ErrorKind, RequestRecord

__all__ = [
    "ACCEPT_LENGTH_SOURCES",
    "ACCEPT_LENGTH_TOLERANCE",
    "CLIENT_BEHIND_MS",
    "STEADY_OPEN_LOOP_FRACTION",
    "derive_metrics",
    "failure_kinds",
    "not_comparable",
    "percentile",
    "request_accept_length",
    "request_verify_count",
]

# Where each acceptance-length metric comes from (the registry's sources); a check names one of these sources:
# requests = per-request meta_info of the measured requests (client side); server = /server_info
# internal_states[0].avg_spec_accept_length (since the flush); gauge = /metrics sglang:spec_accept_length
# (recent window, per tp_rank).
ACCEPT_LENGTH_SOURCES: Mapping[str, str] = {source.value: m.name for source, m in ACCEPT_LENGTH_BY_SOURCE.items()}
ACCEPT_LENGTH_TOLERANCE = 0.05
CLIENT_BEHIND_MS = 10.0
STEADY_OPEN_LOOP_FRACTION = 0.10
_MS = 1_000_000


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def request_verify_count(meta_info: Mapping[str, Any]) -> float | None:
    """Verify steps of one request: ``spec_verify_ct``, else derived from ``spec_accept_length``."""
    verify = _number(meta_info.get("spec_verify_ct"))
    if verify is not None and verify > 0:
        return verify
    tokens = _number(meta_info.get("completion_tokens"))
    accept = _number(meta_info.get("spec_accept_length"))
    if tokens and accept and accept > 0:
        return tokens / accept
    return None


def request_accept_length(meta_info: Mapping[str, Any]) -> float | None:
    """Acceptance length of one request, or None when the server reports no speculative decoding."""
    accept = _number(meta_info.get("spec_accept_length"))
    if accept is not None and accept > 0:
        return accept
    verify = _number(meta_info.get("spec_verify_ct"))
    tokens = _number(meta_info.get("completion_tokens"))
    if verify and verify > 0 and tokens is not None:
        return tokens / verify
    return None


def percentile(values: Sequence[float], q: float) -> float | None:
    """q-th percentile (0..100) with linear interpolation; None for no values."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _dist(out: dict[str, float | None], name: str, values_s: Sequence[float], qs: Sequence[int] = (50, 95, 99)) -> None:
    """``name_ms_pQ`` for each q and ``name_ms_mean``, from values in seconds."""
    for q in qs:
        p = percentile(values_s, q)
        out[f"{name}_ms_p{q}"] = None if p is None else p * 1000.0
    out[f"{name}_ms_mean"] = sum(values_s) / len(values_s) * 1000.0 if values_s else None


def failure_kinds(records: Sequence[RequestRecord]) -> dict[ErrorKind, int]:
    """How many measured requests failed, by kind (what the run layer decides outcomes from)."""
    counts: dict[ErrorKind, int] = {}
    for r in records:
        if not r.warmup and not r.ok and r.error_kind is not None:
            counts[r.error_kind] = counts.get(r.error_kind, 0) + 1
    return counts


def _steady_window(measured: Sequence[RequestRecord], manifest: Manifest | None) -> tuple[int, int] | None:
    sends = sorted(r.sent_ns for r in measured)
    if len(sends) < 2:
        return None
    if manifest is not None and manifest.loop == "closed":
        k = min(manifest.concurrency, len(sends))
    else:
        k = max(1, math.ceil(STEADY_OPEN_LOOP_FRACTION * len(sends)))
    start, end = sends[k - 1], sends[-1]
    return (start, end) if end > start else None


def _in_flight(measured: Sequence[RequestRecord]) -> tuple[int, float]:
    """(maximum requests in flight at once, request-ns in flight) over the measured requests."""
    events = sorted([(r.sent_ns, 1) for r in measured] + [(r.closed_ns, -1) for r in measured],
                    key=lambda e: (e[0], e[1]))
    peak = level = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    return peak, float(sum(r.closed_ns - r.sent_ns for r in measured))


def derive_metrics(
    records: Sequence[RequestRecord],
    trace: ClientTrace | None = None,
    manifest: Manifest | None = None,
) -> dict[str, float | None]:
    """Every workload metric of one run, from its raw records (see the module docstring for definitions).

    Pure: the same records, trace and manifest always give the same numbers. Keys whose inputs are missing
    (no streaming, no speculative decoding, no trace) are present with None."""
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.ok]
    out: dict[str, float | None] = {}
    _counts(out, records, measured, ok)
    _throughput(out, measured, ok, manifest)
    _latency(out, ok)
    _client_account(out, measured, trace, manifest)
    return out


# Each part below adds its keys to ``out`` in the order result.json lists them.


def _counts(out: dict[str, float | None], records: Sequence[RequestRecord], measured: Sequence[RequestRecord],
            ok: Sequence[RequestRecord]) -> None:
    # --- counts and acceptance length -----------------------------------------------------------------------
    out[REQUESTS_OK.name] = len(ok)
    out[REQUESTS_FAILED.name] = len(measured) - len(ok)
    kinds = failure_kinds(records)
    for kind in ErrorKind:
        out[f"requests_failed_{kind.value.replace('-', '_')}"] = kinds.get(kind, 0)
    out["completion_tokens"] = sum(r.completion_tokens for r in ok)
    out["requests_client_counted"] = sum(1 for r in measured if r.token_source != "server")
    spec_tokens, verify_sum, chunk_steps = 0, 0.0, 0
    for r in ok:
        verify = request_verify_count(r.meta_info)
        if verify is not None:
            spec_tokens += r.completion_tokens
            verify_sum += verify
            chunk_steps += max(0, len(r.content_chunks) - 1) if r.stream else 0
    accept = spec_tokens / verify_sum if verify_sum > 0 else None
    out[ACCEPT_LENGTH.name] = accept
    # Recovered verify counts may be fractional; report whole steps.
    out["spec_verify_ct"] = round(verify_sum) if verify_sum > 0 else None
    by_chunks = spec_tokens / chunk_steps if chunk_steps > 0 and accept is not None else None
    out["accept_length_chunks"] = by_chunks
    rel = by_chunks / accept - 1.0 if by_chunks is not None and accept else None
    out["accept_length_chunks_rel_diff"] = rel
    out["accept_length_chunks_disagree"] = None if rel is None else float(abs(rel) > ACCEPT_LENGTH_TOLERANCE)



def _throughput(out: dict[str, float | None], measured: Sequence[RequestRecord], ok: Sequence[RequestRecord],
                manifest: Manifest | None) -> None:
    completion = sum(r.completion_tokens for r in ok)
    # --- throughput, full window --------------------------------------------------------------------------
    last_tokens = [t for r in measured if (t := r.last_token_ns) is not None]
    first_send = min((r.written_ns if r.written_ns is not None else r.sent_ns for r in measured), default=None)
    window = (max(last_tokens) - first_send) / NS if last_tokens and first_send is not None else None
    window = window if window and window > 0 else None
    out["window_s"] = window
    out[OUTPUT_THROUGHPUT.name] = completion / window if window else None
    out[REQUEST_THROUGHPUT.name] = len(ok) / window if window else None

    # --- throughput, steady state ---------------------------------------------------------------------------
    steady = _steady_window(measured, manifest)
    if steady is None:
        out["steady_window_s"] = out["output_throughput_tok_s_steady"] = None
    else:
        a, b = steady
        tokens = 0
        for r in ok:
            last = 0
            for t, n in r.chunks:
                if n > last:
                    if a <= t <= b:
                        tokens += n - last
                    last = n
        out["steady_window_s"] = (b - a) / NS
        out["output_throughput_tok_s_steady"] = tokens / ((b - a) / NS)


def _latency(out: dict[str, float | None], ok: Sequence[RequestRecord]) -> None:
    # --- latency ------------------------------------------------------------------------------------------
    streamed = [r for r in ok if r.stream]
    _dist(out, "ttft", [x for r in streamed if (x := r.ttft_s) is not None])
    _dist(out, "tpot", [y for r in streamed if (y := r.tpot_s) is not None])
    _dist(out, "itl", [x for r in streamed for x in r.itl_s])
    _dist(out, "chunk_latency", [x for r in streamed for x in r.chunk_gaps_s])
    _dist(out, "e2e", [r.e2e_s for r in ok])
    _dist(out, "close", [(r.closed_ns - lt) / NS for r in streamed if (lt := r.last_token_ns) is not None],
          qs=(50, 99))
    decode_tokens = sum(r.completion_tokens - r.content_chunks[0][1] for r in streamed if r.content_chunks)
    decode_chunks = sum(len(r.content_chunks) - 1 for r in streamed if r.content_chunks)
    out["tokens_per_chunk_mean"] = decode_tokens / decode_chunks if decode_chunks else None


def _client_account(out: dict[str, float | None], measured: Sequence[RequestRecord], trace: ClientTrace | None,
                    manifest: Manifest | None) -> None:
    # --- the client's account of itself ---------------------------------------------------------------------
    delays = [(r.sent_ns - r.due_ns) / NS for r in measured]
    _dist(out, "sched_delay", delays, qs=(50, 99))
    out["sched_delay_ms_max"] = max(delays) * 1000.0 if delays else None
    lags = [x / 1000.0 for x in trace.loop_lag_us] if trace is not None else []
    for q in (50, 99):
        p = percentile(lags, q)
        out[f"loop_lag_ms_p{q}"] = p
    out["loop_lag_ms_max"] = max(lags) if lags else None
    phase = None
    if trace is not None and trace.measured_start_ns is not None and trace.measured_end_ns is not None:
        phase = (trace.measured_end_ns - trace.measured_start_ns) / NS
    out["client_cpu_fraction"] = trace.cpu_ns / NS / phase if trace is not None and phase else None
    sends = sorted(r.sent_ns for r in measured)
    # From the first request's due time, so a client that sends late (in a burst) shows a lower rate.
    first_due = min((r.due_ns for r in measured), default=0)
    span = (sends[-1] - first_due) / NS if len(sends) >= 2 else 0.0
    out["achieved_rate_rps"] = (len(sends) - 1) / span if span > 0 else None
    out["requested_rate_rps"] = manifest.request_rate if manifest is not None else None
    peak, busy_ns = _in_flight(measured)
    out["concurrency_max"] = peak if measured else None
    full_ns = (max(r.closed_ns for r in measured) - sends[0]) if measured else 0
    out["achieved_concurrency_mean"] = busy_ns / full_ns if full_ns > 0 else None
    out["requested_concurrency"] = manifest.concurrency if manifest is not None else None
    p99 = out["sched_delay_ms_p99"]
    out["client_fell_behind"] = None if p99 is None else float(p99 > CLIENT_BEHIND_MS)


def not_comparable(metrics: Mapping[str, Any]) -> str | None:
    """Why a result's metrics must not be compared with another's (the client fell behind), or None."""
    if metrics.get("client_fell_behind") != 1.0:
        return None
    sched, lag = metrics.get("sched_delay_ms_p99"), metrics.get("loop_lag_ms_p99")
    detail = f"scheduling delay p99 {sched:.1f} ms > {CLIENT_BEHIND_MS:g} ms" if isinstance(sched, float) else "flagged"
    if isinstance(lag, float):
        detail += f"; event-loop lag p99 {lag:.1f} ms"
    return f"the client fell behind ({detail})"
