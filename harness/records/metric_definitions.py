"""The metrics a run records, each defined once: its name in ``result.json``, unit, which way is better,
the smallest relative change worth reporting, and where the figure comes from.

Checks (``harness.pipeline``), statistics and comparison (``harness.compare.verdicts``, ``harness.compare.runner``),
change detection over history (``harness.series.points``), nightly and the reports read these entries
instead of spelling names, directions and tolerances of their own. ``harness.measure.client_side`` defines how each
per-request figure is computed; this module says what it is.

Minimum effects: 2% for acceptance length (it is a property of the model and the drafter, steady from run
to run), 5% for throughput and latency (noisier on shared machines).
"""

from __future__ import annotations

import re
from collections.abc import Container, Mapping
from dataclasses import dataclass
from typing import Protocol

from harness.util.str_enum import StrEnum

__all__ = [
    "ACCEPT_LENGTH",
    "ACCEPT_LENGTH_BY_SOURCE",
    "ACCEPT_LENGTH_GAUGE",
    "ACCEPT_LENGTH_SERVER",
    "ACCEPT_RATE",
    "CACHE_HIT_RATE",
    "COMPARED",
    "CROSS_PHASE",
    "E2E_P50",
    "ITL_P50",
    "KEY",
    "METRICS",
    "OUTPUT_THROUGHPUT",
    "PHASE_COMPARED",
    "PHASE_ONLY",
    "PHASE_SEPARATOR",
    "REQUESTS_FAILED",
    "REQUESTS_OK",
    "READY_S",
    "REQUEST_THROUGHPUT",
    "RUN_FIGURES",
    "SERVER_TRIAL",
    "SHOWN",
    "TTFT_P50",
    "Better",
    "Metric",
    "Source",
    "client_timed",
    "figure",
    "metric",
    "measured_positions",
    "position_figure",
    "position_metric",
    "position_of",
    "relative_tolerances",
]


class Better(StrEnum):
    """Which way a metric improves."""

    HIGHER = "higher"
    LOWER = "lower"


class Source(StrEnum):
    """Where a figure comes from. SGLang reports acceptance length three ways that differ
    (``harness.measure.client_side`` explains each), so a check names its source."""

    REQUESTS = "requests"  # computed by the harness from the measured requests' own records
    SERVER = "server"  # the server's own summary (/server_info)
    GAUGE = "gauge"  # a Prometheus gauge scraped from /metrics (a recent window)


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
    # A table column's heading where the label is too long (the dashboard's overview, CI's step summary).
    short: str = ""
    # Timed by the client's clock (a rate, a latency): a trial whose client fell behind measured its own lateness
    # in these, and they are left out of a comparison; counts (tokens per step, hit rates) are still the server's.
    client_timed: bool = False

    @property
    def higher_is_better(self) -> bool:
        return self.better is Better.HIGHER

    @property
    def heading(self) -> str:
        """What a table column of this metric is headed by: the short name, else the label."""
        return self.short or self.label


ACCEPT_LENGTH = Metric("accept_length", "Acceptance length (measured requests)", "tokens/step", Better.HIGHER,
                       Source.REQUESTS, 0.02, "accept_length_max_regression", "accept length")
ACCEPT_LENGTH_SERVER = Metric("accept_length_server", "Acceptance length (server)", "tokens/step", Better.HIGHER,
                              Source.SERVER, 0.02)
ACCEPT_LENGTH_GAUGE = Metric("accept_length_gauge", "Acceptance length (/metrics gauge)", "tokens/step",
                             Better.HIGHER, Source.GAUGE)
OUTPUT_THROUGHPUT = Metric("output_throughput_tok_s", "Output throughput", "tok/s", Better.HIGHER,
                           Source.REQUESTS, 0.05, "output_throughput_max_regression", "output tok/s", client_timed=True)
REQUEST_THROUGHPUT = Metric("request_throughput_rps", "Request throughput", "req/s", Better.HIGHER, Source.REQUESTS,
                            0.05, client_timed=True)
TTFT_P50 = Metric("ttft_ms_p50", "Time to first token (p50)", "ms", Better.LOWER, Source.REQUESTS, 0.05,
                  client_timed=True)
ITL_P50 = Metric("itl_ms_p50", "Inter-token latency (p50)", "ms", Better.LOWER, Source.REQUESTS, 0.05,
                 client_timed=True)
E2E_P50 = Metric("e2e_ms_p50", "End-to-end latency (p50)", "ms", Better.LOWER, Source.REQUESTS, 0.05,
                 client_timed=True)
REQUESTS_OK = Metric("requests_ok", "Requests that succeeded", "requests", Better.HIGHER, Source.REQUESTS)
REQUESTS_FAILED = Metric("requests_failed", "Requests that failed", "requests", Better.LOWER, Source.REQUESTS)

# The figures of a whole run (``result.json`` metrics); every one is also kept per workload phase where it exists.
METRICS: Mapping[str, Metric] = {m.name: m for m in (
    ACCEPT_LENGTH, ACCEPT_LENGTH_SERVER, ACCEPT_LENGTH_GAUGE, OUTPUT_THROUGHPUT, REQUEST_THROUGHPUT, TTFT_P50,
    ITL_P50, E2E_P50, REQUESTS_OK, REQUESTS_FAILED,
)}

# Figures that exist only per phase of a stateful workload (``harness.workload.phases``), as NAME@PHASE; a
# fraction each, so no unit is printed.
ACCEPT_RATE = Metric("accept_rate", "Draft acceptance rate", "", Better.HIGHER, Source.REQUESTS, 0.02)
CACHE_HIT_RATE = Metric("cache_hit_rate", "Prefix-cache hit rate (cached_tokens)", "", Better.HIGHER,
                        Source.REQUESTS, 0.02)
PHASE_ONLY: Mapping[str, Metric] = {m.name: m for m in (ACCEPT_RATE, CACHE_HIT_RATE)}

# The rate at which the k-th draft token is accepted (harness.measure.acceptance.accept_by_position), per phase as
# accept_rate_pos<k>@PHASE: the figure vLLM's and TensorRT-LLM's acceptance tests gate on. Judged as
# ACCEPT_RATE is, between builds and over nights.
_POSITION = re.compile(r"accept_rate_pos([1-9][0-9]*)")


def position_metric(k: int) -> str:
    """The name of the acceptance rate at draft position ``k`` (1-based)."""
    return f"{ACCEPT_RATE.name}_pos{k}"


def position_of(name: str) -> int | None:
    """The draft position a figure's name (without its phase) is the acceptance rate of; None otherwise."""
    found = _POSITION.fullmatch(name)
    return int(found.group(1)) if found else None


def measured_positions(names: Container[str], phase: str) -> int:
    """How many draft positions, 1..k with no gap, have an acceptance rate among ``names`` in ``phase``."""
    k = 0
    while f"{position_metric(k + 1)}{PHASE_SEPARATOR}{phase}" in names:
        k += 1
    return k


def position_figure(k: int) -> Metric:
    """The registry's entry for the acceptance rate at draft position ``k``: ACCEPT_RATE's rule, its own label."""
    return Metric(position_metric(k), f"{ACCEPT_RATE.label} at draft position {k}", ACCEPT_RATE.unit,
                  ACCEPT_RATE.better, ACCEPT_RATE.source, ACCEPT_RATE.min_effect)

# The separator of a per-phase figure's name (``accept_length@after``).
PHASE_SEPARATOR = "@"

# What ``compare`` judges between builds by default; the others are shown beside them.
COMPARED: tuple[Metric, ...] = (ACCEPT_LENGTH, OUTPUT_THROUGHPUT)
# Carried per trial into a comparison beside the judged ones, for the reader.
SHOWN: tuple[Metric, ...] = (ACCEPT_LENGTH_SERVER, TTFT_P50, ITL_P50, REQUEST_THROUGHPUT)
# Judged per phase of a stateful workload between builds (a verdict each: better / same / worse).
PHASE_COMPARED: tuple[Metric, ...] = (ACCEPT_LENGTH, ACCEPT_RATE, CACHE_HIT_RATE)
# Printed with a failed scenario item (the pytest plugin's failure text), in this order.
KEY: tuple[Metric, ...] = (ACCEPT_LENGTH, ACCEPT_LENGTH_SERVER, OUTPUT_THROUGHPUT, REQUESTS_OK, REQUESTS_FAILED)
# What a cross-phase check may compare (``checks.across_phases[].metric``), both phases of one run.
CROSS_PHASE: tuple[Metric, ...] = (ACCEPT_LENGTH, CACHE_HIT_RATE, OUTPUT_THROUGHPUT, ACCEPT_RATE)

# The run's own figures, recorded beside the workload's (not judged, not compared): how long the server took
# to become ready (a fresh start), and which trial of a shared server this was (a reused one).
READY_S = "ready_s"
SERVER_TRIAL = "server_trial"
RUN_FIGURES: tuple[str, ...] = (READY_S, SERVER_TRIAL)

# The acceptance length a check bounds, by the source it names (``checks.accept_length.source``).
ACCEPT_LENGTH_BY_SOURCE: Mapping[Source, Metric] = {
    m.source: m for m in (ACCEPT_LENGTH, ACCEPT_LENGTH_SERVER, ACCEPT_LENGTH_GAUGE)}


def metric(name: str) -> Metric:
    """The registry's entry for ``name``; KeyError names it when there is none."""
    try:
        return METRICS[name]
    except KeyError:
        raise KeyError(f"no metric {name!r} in harness.records.metric_definitions") from None


def figure(name: str) -> Metric | None:
    """The entry a stored metric name is read by: a run's figure, or the figure a per-phase name
    (NAME@PHASE) is of, including those that exist only per phase; None for a name not registered."""
    base, _, phase = name.partition(PHASE_SEPARATOR)
    if name in METRICS:
        return METRICS[name]
    if not phase:
        return None
    k = position_of(base)
    return position_figure(k) if k is not None else METRICS.get(base) or PHASE_ONLY.get(base)


class _RelativeChecks(Protocol):
    """``harness.scenario.model.RelativeChecks`` as read here (the registry stays below the scenario model)."""

    accept_length_max_regression: float | None
    output_throughput_max_regression: float | None


def client_timed(name: str) -> bool:
    """Whether a stored figure (``NAME`` or ``NAME@PHASE``) is timed by the client's clock; an unregistered name
    is taken as timed, so a client that fell behind never lends it a comparison."""
    found = figure(name)
    return found is None or found.client_timed


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
