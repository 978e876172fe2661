"""Acceptance beyond one number: by draft position, against the cache state, and over time.

What SGLang gives per finished request (``meta_info``, sglang ``srt/managers/tokenizer_manager.py``
``_calculate_spec_decoding_metrics``; harness.contract.facts SPEC_HISTOGRAM_KEYS):

- ``spec_correct_drafts_histogram`` (0.5.14 :2347, 0.5.15 :2380) and its alias ``spec_accept_histogram``
  (0.5.14 :2351, 0.5.15 :2384; both releases send both): bucket ``j`` counts the verify steps that accepted
  exactly ``j`` draft tokens, bonus token excluded; the list grows to the largest ``j`` seen
  (``schedule_batch.py`` ``update_spec_correct_drafts_histogram`` 0.5.14 :1077-1087, 0.5.15 :1079-1089).
  Draft position ``k`` (1-based) is accepted in a step iff that step accepted ``>= k`` drafts, so the rate
  at which position ``k`` is accepted is ``sum(h[j] for j >= k) / sum(h)``: the figure vLLM's and
  TensorRT-LLM's acceptance tests gate on.
- ``cached_tokens`` (prefix-cache hits of the prompt; ``schedule_batch.py`` 0.5.14 :2104-2105) and, when any,
  ``cached_tokens_details`` ``{"device": d, "host": h}`` (``output_streamer.py`` 0.5.14 :58-80): ``host`` is
  what HiCache loaded back after an eviction.

The trend test (the sglang#28771 shape: a smooth decline over a long run, not a step) is Kendall's tau of
per-request acceptance length against finish time, one-sided: a decline is called only when ``p`` is
below the level, never from the last value alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.measure.client_side import request_accept_length
from harness.records.metric_definitions import CACHE_HIT_RATE
from harness.records.request_log import RequestRecord

__all__ = [
    "HISTOGRAM_KEYS",
    "Trend",
    "accept_by_position",
    "accept_trend",
    "cache_figures",
    "cache_state",
    "request_histogram",
]

HISTOGRAM_KEYS = ("spec_correct_drafts_histogram", "spec_accept_histogram")  # 0.5.15's name first, then the alias


def request_histogram(meta_info: Mapping[str, Any]) -> list[int] | None:
    """The request's acceptance histogram under either name, or None."""
    for key in HISTOGRAM_KEYS:
        value = meta_info.get(key)
        if isinstance(value, list) and value and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                                                     for x in value):
            return list(value)
    return None


def _drafts_per_step(meta_info: Mapping[str, Any]) -> int | None:
    proposed, verify = meta_info.get("spec_num_proposed_drafts"), meta_info.get("spec_verify_ct")
    if isinstance(proposed, (int, float)) and isinstance(verify, (int, float)) and verify > 0 and proposed > 0:
        return max(1, round(proposed / verify))
    return None


def accept_by_position(records: Sequence[RequestRecord]) -> list[float]:
    """Rate at which draft position 1, 2, ... was accepted over ``records``' verify steps (empty: no histogram).

    Positions run to the drafts proposed per step when the server says (``spec_num_proposed_drafts /
    spec_verify_ct``), else to the longest histogram seen.
    """
    totals: list[int] = []
    steps = 0
    depth = 0
    for r in records:
        h = request_histogram(r.meta_info) if r.ok else None
        if h is None:
            continue
        depth = max(depth, _drafts_per_step(r.meta_info) or 0, len(h) - 1)
        if len(totals) < len(h):
            totals.extend([0] * (len(h) - len(totals)))
        for j, n in enumerate(h):
            totals[j] += n
        steps += sum(h)
    if not steps:
        return []
    totals.extend([0] * (depth + 1 - len(totals)))
    return [sum(totals[k:]) / steps for k in range(1, depth + 1)]


def cache_state(meta_info: Mapping[str, Any]) -> str:
    """``miss``, ``device`` (a prefix hit on the device tier) or ``host`` (part of it loaded back from HiCache)."""
    cached = meta_info.get("cached_tokens")
    if not isinstance(cached, (int, float)) or cached <= 0:
        return "miss"
    details = meta_info.get("cached_tokens_details")
    host = details.get("host") if isinstance(details, Mapping) else None
    return "host" if isinstance(host, (int, float)) and host > 0 else "device"


def cache_figures(records: Sequence[RequestRecord]) -> dict[str, float | None]:
    """Prefix-cache hit rate (cached / prompt tokens) and the share loaded back from the host, of ok requests."""
    prompt = cached = host = 0.0
    seen = False
    for r in records:
        if not r.ok:
            continue
        c = r.meta_info.get("cached_tokens")
        p = r.meta_info.get("prompt_tokens", r.prompt_tokens)
        if not isinstance(c, (int, float)) or not isinstance(p, (int, float)):
            continue
        seen = True
        prompt += p
        cached += c
        details = r.meta_info.get("cached_tokens_details")
        h = details.get("host") if isinstance(details, Mapping) else None
        host += h if isinstance(h, (int, float)) else 0.0
    if not seen or not prompt:
        return {CACHE_HIT_RATE.name: None, "cache_host_rate": None}
    return {CACHE_HIT_RATE.name: cached / prompt, "cache_host_rate": host / prompt}


@dataclass(frozen=True)
class Trend:
    """Kendall's tau of acceptance length against time, and the one-sided p of a decline."""

    tau: float
    p_decline: float
    n: int

    def declining(self, alpha: float) -> bool:
        return self.tau < 0 and self.p_decline < alpha


def accept_trend(records: Sequence[RequestRecord]) -> Trend | None:
    """The trend of per-request acceptance length over finish time; None with fewer than 8 requests."""
    points = [(r.done_ns, a) for r in records
              if r.ok and r.done_ns is not None and (a := request_accept_length(r.meta_info)) is not None]
    if len(points) < 8:
        return None
    from scipy.stats import kendalltau  # scipy is already the statistics layer's dependency

    points.sort()
    res = kendalltau([t for t, _ in points], [a for _, a in points], alternative="less")
    tau, p = float(res.statistic), float(res.pvalue)
    if math.isnan(tau):  # every acceptance length equal: no trend at all
        return Trend(0.0, 1.0, len(points))
    return Trend(tau, p, len(points))
