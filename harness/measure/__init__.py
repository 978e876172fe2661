"""Figures from a run: client-side metrics from request records, server-side ones, acceptance and statistics. What a
run is judged against is ``harness.expectations``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.util.face import lazy_face

if TYPE_CHECKING:  # the face's names; each module is imported when one of its names is first used
    from harness.measure.acceptance import accept_by_position, accept_trend, cache_figures, cache_state
    from harness.measure.client_side import derive_metrics, not_comparable, request_accept_length, request_verify_count
    from harness.measure.server_side import (
        AttentionBackends,
        aggregate,
        attention_backends,
        attention_from_start,
        read_server_figures,
        recompute,
        server_info,
    )
    from harness.measure.statistics import min_p_value, summarize

__all__ = ["AttentionBackends", "accept_by_position", "accept_trend", "aggregate", "attention_backends", "attention_from_start",
           "cache_figures", "cache_state", "derive_metrics", "min_p_value", "not_comparable", "read_server_figures", "recompute",
           "request_accept_length", "request_verify_count", "server_info", "summarize"]
__getattr__ = lazy_face(__name__)
