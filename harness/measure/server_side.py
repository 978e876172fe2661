"""Server-side figures (acceptance length from `/server_info` and `/metrics`), and the bridge to
:mod:`harness.measure.client_side`, where every client-side metric is defined.

Three acceptance lengths exist and are never compared with one another
(:data:`harness.measure.client_side.ACCEPT_LENGTH_SOURCES`):

- ``accept_length``: per-request ``spec_accept_length`` of the measured requests (client side, derived).
- ``accept_length_server``: ``internal_states[0].avg_spec_accept_length`` from ``GET /server_info``:
  accepted tokens / forward count over every request the server ran (other clients' too). Not a lifetime
  figure: it counts since the last ``/flush_cache``, which resets it (the harness flushes before each trial
  on a reused server; a fresh server's first trial includes SGLang's warm-up), and it is folded in only
  every ``decode_log_interval`` (40) decode batches, so it is absent until 40 decode batches after the flush
  (sglang ``srt/managers/scheduler.py`` ``get_internal_state`` 0.5.14:3683-3690 / 0.5.15:3771-3778; the
  counters in ``srt/managers/scheduler_components/metrics_reporter.py`` 0.5.14:674, 723-724, reset 487-493 /
  0.5.15:696, 745-746, 502-508; harness.contract.facts AVG_ACCEPT_LENGTH_KEY). Upstream's own test floor (1.5) is
  on this one. Absent: None.
  ``/server_info`` is current in 0.5.14 and 0.5.15; ``/get_server_info`` is deprecated in both and logs a
  warning per call (``srt/entrypoints/http_server.py`` 0.5.14:678-685 / 0.5.15:695-702), so it is asked only
  when ``/server_info`` answers 404 (older releases).
- ``accept_length_gauge``: the ``sglang:spec_accept_length`` gauge of ``/metrics`` (``--enable-metrics``;
  ``srt/observability/metrics_collector.py:414-419`` in both): the last log interval's figure, one sample per
  rank label set (``tp_rank``, ``pp_rank``, ...; ``metrics_collector.py`` 0.5.15:1055-1061); the sample
  with ``tp_rank="0"`` is taken, else the first.

Every read here is short-bounded (:data:`SERVER_READ_TIMEOUT_S` per request): after request timeouts the
server may be hung, and a verdict must not wait on it.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.contract import facts as contract
from harness.measure.client_side import (
    derive_metrics,
    percentile,
    request_accept_length,
    request_verify_count,
)
from harness.records.manifest import Manifest
from harness.records.metric_definitions import ACCEPT_LENGTH_GAUGE, ACCEPT_LENGTH_SERVER
from harness.records.request_log import ClientTrace, RequestRecord
from harness.server import http

__all__ = [
    "AttentionBackends",
    "attention_backends",
    "attention_from_start",
    "AGGREGATE_KEYS",
    "SERVER_READ_TIMEOUT_S",
    "Recomputed",
    "ServerFigures",
    "aggregate",
    "gauge_accept_length",
    "metric_value",
    "parse_prometheus",
    "percentile",
    "read_server_figures",
    "server_info",
    "recompute",
    "request_accept_length",
    "request_verify_count",
    "scrape_metrics",
    "server_accept_length",
]

log = logging.getLogger(__name__)

SERVER_READ_TIMEOUT_S = 1.0
_SERVER_INFO_PATHS = contract.SERVER_INFO_PATHS
AGGREGATE_KEYS = tuple(derive_metrics(()))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def aggregate(
    records: Sequence[RequestRecord],
    measured_wall_s: float | None = None,
    *,
    trace: ClientTrace | None = None,
    manifest: Manifest | None = None,
) -> dict[str, float | None]:
    """:func:`harness.measure.client_side.derive_metrics`; ``measured_wall_s`` is accepted for older callers and unused
    (the windows come from the records' own timestamps)."""
    del measured_wall_s
    return derive_metrics(records, trace, manifest)


def _get(url: str, timeout_s: float, headers: Mapping[str, str] | None = None) -> tuple[int, bytes]:
    reply = http.get(url, timeout_s=timeout_s, headers=dict(headers or {}))
    return reply.status, reply.body


def server_info(base_url: str, *, timeout_s: float = SERVER_READ_TIMEOUT_S,
                headers: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The body of `/server_info` (or the older `/get_server_info`), or None (no endpoint, no server, not JSON)."""
    for path in _SERVER_INFO_PATHS:
        try:
            status, raw = _get(base_url.rstrip("/") + path, timeout_s, headers)
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
        return info if isinstance(info, dict) else None
    return None


def server_accept_length(base_url: str, *, timeout_s: float = SERVER_READ_TIMEOUT_S,
                         headers: Mapping[str, str] | None = None) -> float | None:
    """`internal_states[0].avg_spec_accept_length` from the server, or None (no key, no endpoint, no server)."""
    info = server_info(base_url, timeout_s=timeout_s, headers=headers)
    if info is None:
        return None
    states = info.get("internal_states")
    state = states[0] if isinstance(states, list) and states and isinstance(states[0], dict) else {}
    value = _number(state.get("avg_spec_accept_length"))
    return value if value is not None else _number(info.get("avg_spec_accept_length"))


@dataclass(frozen=True)
class AttentionBackends:
    """The attention backends a server runs, and where the harness learnt them."""

    decode: str | None
    draft: str | None  # the speculative draft's; None without speculative decoding
    source: str  # "server_info" (what the server resolved), "flags" or "log" (a server that never answered)

    def as_dict(self) -> dict[str, str | None]:
        return {"attention_backend": self.decode, "draft_attention_backend": self.draft,
                "attention_backend_source": self.source}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def attention_backends(info: Mapping[str, Any], *, speculative: bool) -> AttentionBackends | None:
    """The decode and draft backends in a `/server_info` body, resolved as SGLang resolves them
    (harness.contract.facts RESOLVED_ATTENTION_KEYS); None when it names none."""
    attn, decode_key, draft_key = contract.RESOLVED_ATTENTION_KEYS
    decode = _text(info.get(decode_key)) or _text(info.get(attn))
    if decode is None:
        return None
    draft = (_text(info.get(draft_key)) or decode) if speculative else None
    return AttentionBackends(decode, draft, "server_info")


# SGLang's INFO line when it fills in Gemma-4's default (server_args.py 0.5.14 :4067-4069; 0.5.15
# arg_groups/overrides.py :613-615), the reference server's too: all a server that died before it answered
# says of its backend, and only at --log-level info.
_DEFAULT_BACKEND_LINE = re.compile(r"Use (\S+) as default attention backend for Gemma4")


def _flag(flags: Sequence[str], name: str) -> str | None:
    for i, arg in enumerate(flags):
        if arg == name and i + 1 < len(flags):
            return flags[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def attention_from_start(flags: Sequence[str], log_head: str, *, speculative: bool) -> AttentionBackends | None:
    """The backends of a server that never answered `/server_info`: from its flags, else its default line."""
    attn, decode_key, draft_key = (f"--{k.replace('_', '-')}" for k in contract.RESOLVED_ATTENTION_KEYS)
    decode, source = _flag(flags, decode_key) or _flag(flags, attn), "flags"
    if decode is None:
        m = _DEFAULT_BACKEND_LINE.search(log_head)
        decode, source = (m.group(1), "log") if m else (None, "")
    if decode is None:
        return None
    draft = (_flag(flags, draft_key) or decode) if speculative else None
    return AttentionBackends(decode, draft, source)


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


def scrape_metrics(base_url: str, *,
                   timeout_s: float = SERVER_READ_TIMEOUT_S) -> dict[str, list[tuple[dict[str, str], float]]]:
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


def gauge_accept_length(parsed: Mapping[str, list[tuple[dict[str, str], float]]]) -> float | None:
    """``sglang:spec_accept_length`` of rank 0 (``tp_rank="0"``), else the first sample; None when absent."""
    samples = parsed.get("sglang:spec_accept_length", [])
    for labels, value in samples:
        if labels.get("tp_rank") == "0":
            return _number(value)
    return _number(samples[0][1]) if samples else None


@dataclass(frozen=True)
class ServerFigures:
    """What the server says about itself after a workload; None where it could not say in time."""

    accept_length_server: float | None
    accept_length_gauge: float | None

    def as_metrics(self) -> dict[str, float | None]:
        return {ACCEPT_LENGTH_SERVER.name: self.accept_length_server, ACCEPT_LENGTH_GAUGE.name: self.accept_length_gauge}


def read_server_figures(base_url: str, *, metrics_enabled: bool, timeout_s: float = SERVER_READ_TIMEOUT_S,
                        headers: Mapping[str, str] | None = None) -> ServerFigures:
    """The server-side acceptance lengths, each read bounded by ``timeout_s`` (at most three reads)."""
    server = server_accept_length(base_url, timeout_s=timeout_s, headers=headers)
    gauge = gauge_accept_length(scrape_metrics(base_url, timeout_s=timeout_s)) if metrics_enabled else None
    return ServerFigures(accept_length_server=server, accept_length_gauge=gauge)


# --------------------------------------------------------------------------- recompute a run


@dataclass(frozen=True)
class Recomputed:
    """A run's workload metrics recomputed from its ``requests.jsonl``, and how they compare with its result.json."""

    requests_jsonl: str
    manifest: dict[str, Any] | None
    metrics: dict[str, Any]
    not_comparable: str | None
    result_json: str | None  # None: the run has no result.json to compare with
    differs: dict[str, dict[str, Any]]  # name -> {"recomputed": ..., "result_json": ...}
    not_in_result_json: list[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def _stored_metrics(path: Path, data: Any) -> dict[str, Any]:
    """``metrics`` of a result.json, each a number or null; UserError naming the field otherwise (a record
    with a string where a figure belongs is not one to check against, and "0 differ" would be a lie)."""
    from harness.util.errors import UserError

    if not isinstance(data, dict):
        raise UserError(f"{path}: a {type(data).__name__}, not a run record (a JSON object)")
    raw = data.get("metrics", {})
    if not isinstance(raw, dict):
        raise UserError(f"{path}: field metrics: a {type(raw).__name__}; a run record's metrics are an object "
                        "of numbers")
    for name, value in raw.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise UserError(f"{path}: field metrics.{str(name)[:60]!r}: a {type(value).__name__}; give a number "
                            "or null")
    return raw


def recompute(run: Path) -> Recomputed:
    """Every workload metric of ``run`` (a run folder or its requests.jsonl) from the raw records, by the one
    function that made them (``derive_metrics``), checked against result.json where it has the same key."""
    from harness.measure.client_side import not_comparable
    from harness.records.request_log import read_requests_jsonl
    from harness.util.bounded_read import read_json
    from harness.util.errors import UserError

    path = run / "requests.jsonl" if run.is_dir() else run
    if not path.is_file():
        raise UserError(f"{path}: no such file (a run folder holds requests.jsonl)")
    log = read_requests_jsonl(path)
    metrics = derive_metrics(log.records, log.trace, log.manifest)
    stored: dict[str, Any] | None = None
    result_path = path.parent / "result.json"
    if os.path.lexists(result_path):
        data = read_json(result_path, "record")  # a link to /dev/zero or a FIFO is refused, not read
        stored = _stored_metrics(result_path, data)
    differs = {k: {"recomputed": v, "result_json": stored[k]} for k, v in metrics.items()
               if stored is not None and k in stored and not _same(v, stored[k])}
    missing = sorted(k for k in metrics if stored is not None and k not in stored)
    return Recomputed(str(path), log.manifest.to_dict() if log.manifest else None, dict(metrics),
                      not_comparable(metrics), str(result_path) if stored is not None else None, differs, missing)
