"""Numbers from a workload: acceptance length, throughput, latency percentiles, server-side metrics.

Acceptance length is aggregated token-weighted, as SGLang defines it per request
(`spec_accept_length = completion_tokens / spec_verify_ct`): sum of completion tokens over sum of verify steps,
over the measured (non-warmup) requests that succeeded. A plain mean of per-request ratios would let short
requests count as much as long ones. When a release reports `spec_accept_length` but not `spec_verify_ct`, the
verify count is recovered as `completion_tokens / spec_accept_length`.

Throughput divides by the wall time of the measured phase. Percentiles interpolate linearly between order
statistics (numpy's default). ITL samples are pooled over all requests, one per token (see workload.py).

Server-side: `avg_spec_accept_length` from `/get_server_info` (newer releases also `/server_info`),
`internal_states[0]`; a server that has not accepted a draft yet may lack the key, which reads as None.
`/metrics` (Prometheus text format, `--enable-metrics`) is parsed by `parse_prometheus`.
"""

from __future__ import annotations

import json
import logging
import math
import re
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from harness.workload import RequestRecord

__all__ = [
    "AGGREGATE_KEYS",
    "aggregate",
    "percentile",
    "request_accept_length",
    "request_verify_count",
    "server_accept_length",
    "parse_prometheus",
    "scrape_metrics",
    "metric_value",
]

log = logging.getLogger(__name__)

AGGREGATE_KEYS = (
    "accept_length",
    "output_throughput_tok_s",
    "request_throughput_rps",
    "ttft_ms_p50",
    "ttft_ms_p95",
    "itl_ms_p50",
    "itl_ms_p95",
    "e2e_ms_p50",
    "e2e_ms_p95",
    "requests_ok",
    "requests_failed",
    "completion_tokens",
    "spec_verify_ct",
)

_SERVER_INFO_PATHS = ("/get_server_info", "/server_info")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def request_verify_count(meta_info: Mapping) -> float | None:
    """Verify steps of one request: `spec_verify_ct`, else derived from `spec_accept_length`."""
    verify = _number(meta_info.get("spec_verify_ct"))
    if verify is not None and verify > 0:
        return verify
    tokens = _number(meta_info.get("completion_tokens"))
    accept = _number(meta_info.get("spec_accept_length"))
    if tokens and accept and accept > 0:
        return tokens / accept
    return None


def request_accept_length(meta_info: Mapping) -> float | None:
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


def _ms(values: Sequence[float], q: float) -> float | None:
    p = percentile(values, q)
    return None if p is None else p * 1000.0


def aggregate(records: Sequence[RequestRecord], measured_wall_s: float) -> dict[str, float | int | None]:
    """The metrics of the measured phase; keys are exactly `AGGREGATE_KEYS`."""
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.ok]
    completion = sum(r.completion_tokens for r in ok)
    spec_tokens = 0
    verify_sum = 0.0
    for r in ok:
        verify = request_verify_count(r.meta_info)
        if verify is not None:
            spec_tokens += r.completion_tokens
            verify_sum += verify
    wall = measured_wall_s if measured_wall_s > 0 else None
    ttft = [r.ttft_s for r in ok if r.ttft_s is not None]
    itl = [x for r in ok for x in r.itl_s]
    e2e = [r.e2e_s for r in ok if r.e2e_s is not None]
    return {
        "accept_length": spec_tokens / verify_sum if verify_sum > 0 else None,
        "output_throughput_tok_s": completion / wall if wall else None,
        "request_throughput_rps": len(ok) / wall if wall else None,
        "ttft_ms_p50": _ms(ttft, 50),
        "ttft_ms_p95": _ms(ttft, 95),
        "itl_ms_p50": _ms(itl, 50),
        "itl_ms_p95": _ms(itl, 95),
        "e2e_ms_p50": _ms(e2e, 50),
        "e2e_ms_p95": _ms(e2e, 95),
        "requests_ok": len(ok),
        "requests_failed": len(measured) - len(ok),
        "completion_tokens": completion,
        # Recovered verify counts may be fractional; report whole steps.
        "spec_verify_ct": round(verify_sum) if verify_sum > 0 else None,
    }


def _get(url: str, timeout_s: float) -> tuple[int, bytes]:
    # An opener without proxy handling: the server is on 127.0.0.1 and must never go through a proxy.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout_s) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


def server_accept_length(base_url: str, *, timeout_s: float = 5.0) -> float | None:
    """`internal_states[0].avg_spec_accept_length` from the server, or None (no key, no endpoint, no server)."""
    for path in _SERVER_INFO_PATHS:
        try:
            status, raw = _get(base_url.rstrip("/") + path, timeout_s)
        except (OSError, ValueError) as exc:
            log.warning("server info %s unreachable: %s", path, exc)
            return None
        if status == 404:
            continue
        if status != 200:
            log.warning("server info %s answered HTTP %s", path, status)
            return None
        try:
            info = json.loads(raw)
        except ValueError:
            log.warning("server info %s is not JSON", path)
            return None
        states = info.get("internal_states") if isinstance(info, dict) else None
        state = states[0] if isinstance(states, list) and states and isinstance(states[0], dict) else {}
        value = _number(state.get("avg_spec_accept_length"))
        if value is None and isinstance(info, dict):
            value = _number(info.get("avg_spec_accept_length"))
        return value
    return None


# --- Prometheus text exposition format -------------------------------------------------------------

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE = re.compile(rf"^({_NAME})\s*(?:\{{(.*)\}})?\s+(\S+)(?:\s+(-?\d+))?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def _parse_labels(text: str) -> dict[str, str] | None:
    labels: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        m = _LABEL.match(text, pos)
        if m is None:
            return None if text[pos:].strip() else labels
        labels[m.group(1)] = re.sub(r"\\[\\\"n]", lambda e: _ESCAPES[e.group(0)], m.group(2))
        pos = m.end()
    return labels


def _parse_value(text: str) -> float | None:
    try:
        return float(text)  # accepts NaN, +Inf, -Inf as the format spells them
    except ValueError:
        return None


def parse_prometheus(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Samples by metric name: `{name: [(labels, value), ...]}`. Comments are skipped; so are malformed lines,
    with a warning naming the line, because one odd line must not lose the whole scrape."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        labels = _parse_labels(m.group(2) or "") if m else None
        value = _parse_value(m.group(3)) if m else None
        if m is None or labels is None or value is None:
            log.warning("metrics line %d is not a Prometheus sample, skipped: %.200s", lineno, line)
            continue
        out.setdefault(m.group(1), []).append((labels, value))
    return out


def scrape_metrics(base_url: str, *, timeout_s: float = 5.0) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Parsed `/metrics`; empty when the endpoint is off (`--enable-metrics` not given) or unreachable."""
    try:
        status, raw = _get(base_url.rstrip("/") + "/metrics", timeout_s)
    except (OSError, ValueError) as exc:
        log.warning("metrics endpoint unreachable: %s", exc)
        return {}
    if status != 200:
        return {}
    return parse_prometheus(raw.decode("utf-8", errors="replace"))


def metric_value(
    parsed: Mapping[str, list[tuple[dict[str, str], float]]], name: str, labels: Mapping[str, str] | None = None
) -> float | None:
    """The first sample of `name` whose labels include `labels`, or None."""
    for sample_labels, value in parsed.get(name, []):
        if labels is None or all(sample_labels.get(k) == v for k, v in labels.items()):
            return value
    return None
