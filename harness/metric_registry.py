"""The metrics a run records, each defined once: its name in ``result.json``, unit, which way is better,
the smallest relative change worth reporting, and where the figure comes from.

Checks (``harness.run``), statistics and comparison (``harness.comparison``, ``harness.compare_runner``),
change detection over history (``harness.history.series``), nightly and the reports read these entries
instead of spelling names, directions and tolerances of their own. ``harness.derive`` defines how each
per-request figure is computed; this module says what it is.

Minimum effects: 2% for acceptance length (it is a property of the model and the drafter, steady from run
to run), 5% for throughput and latency (noisier on shared machines).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

__all__ = [
    "ACCEPT_LENGTH",
    "ACCEPT_LENGTH_BY_SOURCE",
    "COMPARED",
    "METRICS",
    "OUTPUT_THROUGHPUT",
    "Better",
    "Metric",
    "Source",
    "metric",
    "relative_tolerances",
]


class Better(str, Enum):
    """Which way a metric improves."""

    HIGHER = "higher"
    LOWER = "lower"

    def __str__(self) -> str:
        return self.value


class Source(str, Enum):
    """Where a figure comes from. SGLang reports acceptance length three ways that differ
    (``harness.derive`` explains each), so a check names its source."""

    REQUESTS = "requests"  # computed by the harness from the measured requests' own records
    SERVER = "server"  # the server's own summary (/server_info)
    GAUGE = "gauge"  # a Prometheus gauge scraped from /metrics (a recent window)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Metric:
    name: str  # the key in ``result.json`` metrics and in the store
    label: str
    unit: str
    better: Better
    source: Source
    # The smallest relative change that counts as a change; None: reported, never judged across builds.
    min_effect: float | None = None
    # The field of a scenario's ``checks.relative`` that bounds this metric's regression against a baseline.
    relative_check: str | None = None

    @property
    def higher_is_better(self) -> bool:
        return self.better is Better.HIGHER


ACCEPT_LENGTH = Metric("accept_length", "Acceptance length (measured requests)", "tokens/step", Better.HIGHER,
                       Source.REQUESTS, 0.02, "accept_length_max_regression")
OUTPUT_THROUGHPUT = Metric("output_throughput_tok_s", "Output throughput", "tok/s", Better.HIGHER,
                           Source.REQUESTS, 0.05, "output_throughput_max_regression")

METRICS: Mapping[str, Metric] = {m.name: m for m in (
    ACCEPT_LENGTH,
    Metric("accept_length_server", "Acceptance length (server)", "tokens/step", Better.HIGHER, Source.SERVER, 0.02),
    Metric("accept_length_gauge", "Acceptance length (/metrics gauge)", "tokens/step", Better.HIGHER,
           Source.GAUGE),
    OUTPUT_THROUGHPUT,
    Metric("request_throughput_rps", "Request throughput", "req/s", Better.HIGHER, Source.REQUESTS, 0.05),
    Metric("ttft_ms_p50", "Time to first token (p50)", "ms", Better.LOWER, Source.REQUESTS, 0.05),
    Metric("itl_ms_p50", "Inter-token latency (p50)", "ms", Better.LOWER, Source.REQUESTS, 0.05),
    Metric("e2e_ms_p50", "End-to-end latency (p50)", "ms", Better.LOWER, Source.REQUESTS, 0.05),
    Metric("requests_ok", "Requests that succeeded", "requests", Better.HIGHER, Source.REQUESTS),
    Metric("requests_failed", "Requests that failed", "requests", Better.LOWER, Source.REQUESTS),
)}

# What ``compare`` judges between builds by default; the others are shown beside them.
COMPARED: tuple[Metric, ...] = (ACCEPT_LENGTH, OUTPUT_THROUGHPUT)

# The acceptance length a check bounds, by the source it names (``checks.accept_length.source``).
ACCEPT_LENGTH_BY_SOURCE: Mapping[Source, Metric] = {
    m.source: m for m in METRICS.values() if m.name.startswith("accept_length")}


def metric(name: str) -> Metric:
    """The registry's entry for ``name``; KeyError names it when there is none."""
    try:
        return METRICS[name]
    except KeyError:
        raise KeyError(f"no metric {name!r} in harness.metric_registry") from None


class _RelativeChecks(Protocol):
    """``harness.scenario.model.RelativeChecks`` as read here (the registry stays below the scenario model)."""

    accept_length_max_regression: float | None
    output_throughput_max_regression: float | None


def relative_tolerances(relative: _RelativeChecks | None) -> dict[str, float]:
    """The largest regression a scenario's relative checks allow, per metric name; only the checks it sets."""
    if relative is None:
        return {}
    out: dict[str, float] = {}
    for m in METRICS.values():
        value = getattr(relative, m.relative_check, None) if m.relative_check else None
        if value:
            out[m.name] = float(value)
    return out
