"""What the server says of itself: server-side metrics and the model's ground truth after the workload, and the
attention backends it resolved (from ``/server_info``, else from its flags and the head of its log).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.measure.server_side import (
    AttentionBackends,
    attention_backends,
    attention_from_start,
    read_server_figures,
    server_info,
)
from harness.pipeline.stages import Resolved, RunPaths, Scraped, Trail
from harness.scenario.model import Scenario
from harness.server.auth import request_headers
from harness.server.process import ServerProcess
from harness.util.bounded_read import ReadRefused, read_head

__all__ = ["backends", "resolved_backends", "scrape"]

# One /server_info read per trial, once the server is ready (real SGLang asks its scheduler for the internal
# states, so allow more than the per-figure bound of harness.measure.server_side).
_SERVER_INFO_TIMEOUT_S = 5.0
_LOG_HEAD_BYTES = 1 << 20  # the default-backend line is written early in start-up


def scrape(server: ServerProcess, resolved: Resolved) -> Scraped:
    """The server-side metrics (``/metrics`` when enabled, SGLang's own figures) and the model's ground truth."""
    args = resolved.case.scenario.server.args
    figures = read_server_figures(server.url, metrics_enabled=bool(args.get("enable-metrics")),
                                  headers=request_headers(args))
    return Scraped(figures.as_metrics(), resolved.launcher.ground_truth(server.url))


def resolved_backends(server: ServerProcess, resolved: Resolved) -> AttentionBackends | None:
    """The attention backends the ready server resolved, from its `/server_info` (harness.contract.facts
    RESOLVED_ATTENTION_KEYS); None when it does not say within the bound."""
    args = resolved.case.scenario.server.args
    info = server_info(server.url, timeout_s=_SERVER_INFO_TIMEOUT_S, headers=request_headers(args))
    return attention_backends(info, speculative=_speculative(args)) if info else None


def _speculative(args: Mapping[str, Any]) -> bool:
    algo = args.get("speculative-algorithm")
    return bool(algo) and str(algo).upper() != "NONE"


def backends(trail: Trail, paths: RunPaths, sc: Scenario) -> AttentionBackends | None:
    """What the server said it resolved, else (a server that never answered) its flags or its log."""
    if trail.backends is not None or trail.plan is None:
        return trail.backends
    try:
        head = read_head(paths.log, "log", _LOG_HEAD_BYTES).decode("utf-8", errors="replace")
    except (OSError, ReadRefused):
        head = ""
    return attention_from_start(trail.plan.flags, head, speculative=_speculative(sc.server.args))
