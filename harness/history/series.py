"""Series: one (scenario, case, metric, hardware) over builds in order, read from the store.

A point is one build in one batch (a night): its trials' raw values and outcomes. Points are
ordered by the batch's start. Only decided runs that completed their checks (pass, fail) give
metric values: infra and timeout runs never enter a metric series, and a crash has no numbers.
``compare`` batches stay out: they are A/B experiments, not history; so do ``bisect`` and ``minimize``
batches, searches that run old revisions and reduced cases after the fact.
"""

from __future__ import annotations

import gc
import statistics
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import Select, select

from harness.history.steps import Rule
from harness.metric_registry import ACCEPT_RATE, METRICS, PHASE_ONLY, PHASE_SEPARATOR, position_of
from harness.outcome import Outcome, most_telling
from harness.store.schema import batches, metrics
from harness.store.store import Store, runs_select

if TYPE_CHECKING:  # the frames' path only: the dashboard and the review read the store without pandas
    import pandas as pd

__all__ = ["METRIC_RULES", "SERIES_BATCH_KINDS", "CasePoints", "Point", "case_points", "host_changes", "rule_for",
           "collector_paused", "series_hardware",
           "stored_case_points"]

SERIES_BATCH_KINDS = ("nightly", "import", "pytest", "run")

# The metrics judged over history: the registry's with a minimum effect (2% acceptance length, 5% throughput
# and latency).
METRIC_RULES: Mapping[str, Rule] = {m.name: Rule(m.min_effect, m.higher_is_better)
                                    for m in METRICS.values() if m.min_effect is not None}


# A stateful workload's per-phase figures (NAME@PHASE, harness.workload_phase) are series of their own, judged
# by their figure's rule; these figures exist only per phase.
_PHASE_RULES: Mapping[str, Rule] = {m.name: Rule(m.min_effect, m.higher_is_better)
                                    for m in PHASE_ONLY.values() if m.min_effect is not None}


def rule_for(metric: str, tolerances: Mapping[str, float] | None = None) -> Rule | None:
    name, _, phase = metric.partition(PHASE_SEPARATOR)
    if phase and position_of(name) is not None:  # the acceptance rate at one draft position: ACCEPT_RATE's rule
        name = ACCEPT_RATE.name
    base = METRIC_RULES.get(metric) or (METRIC_RULES.get(name) or _PHASE_RULES.get(name) if phase else None)
    if base is None:
        return None
    tol = (tolerances or {}).get(metric)
    return Rule(tol, base.higher_is_better) if tol else base


@dataclass(frozen=True)
class Point:
    batch_id: str
    batch_label: str
    started_at: str
    build_key: str
    build_spec: str
    build_version: str | None
    build_commit: str | None
    outcome: Outcome | None  # the most telling decided outcome of its trials; None: nothing decided
    signatures: tuple[str, ...]
    metrics: Mapping[str, tuple[float, ...]]  # raw per-trial values of pass/fail runs
    artifacts: tuple[str, ...]
    host: Mapping[str, str] = field(default_factory=dict)  # facts that do not key the series: driver, CUDA, platform

    @property
    def build_label(self) -> str:
        return f"{self.build_spec} ({self.batch_label})"

    def value(self, metric: str) -> float | None:
        vals = self.metrics.get(metric)
        if not vals:
            return None
        # One trial is its own median (most nightly points); statistics.median for a few trials, where
        # numpy's per-call overhead is most of the cost.
        return float(vals[0]) if len(vals) == 1 else float(statistics.median(vals))


@dataclass(frozen=True)
class CasePoints:
    scenario: str
    scenario_file: str
    case: str
    hardware: str
    points: tuple[Point, ...]
    # Every metric's series, computed once and in one pass over the points: the points never change,
    # and the dashboard and the review ask for the same series several times (730k points a year).
    _series: dict[str, tuple[list[int], list[float], list[tuple[float, ...]]]] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    _names: list[str] = field(default_factory=list, init=False, repr=False, compare=False)

    def _by_metric(self) -> dict[str, tuple[list[int], list[float], list[tuple[float, ...]]]]:
        """(point indices, values, trials) of every metric: each point's values as ``Point.value`` gives them."""
        if self._series or not self.points:
            return self._series
        names: set[str] = set()
        for i, p in enumerate(self.points):
            for name, vals in p.metrics.items():
                names.add(name)
                if not vals:
                    continue
                got = self._series.get(name)
                if got is None:
                    got = self._series[name] = ([], [], [])
                got[0].append(i)
                got[1].append(float(vals[0]) if len(vals) == 1 else float(statistics.median(vals)))
                got[2].append(vals)
        self._names[:] = sorted(names)
        return self._series

    def series(self, metric: str) -> tuple[list[int], list[float]]:
        """(point indices, values) of the points that have ``metric``."""
        known = self._by_metric().get(metric)
        if known is None:
            return [], []
        return list(known[0]), list(known[1])  # copies: a caller may change its lists

    def trials(self, metric: str) -> list[tuple[float, ...]]:
        """The trials of each point of ``series(metric)``, in its order."""
        known = self._by_metric().get(metric)
        return [] if known is None else list(known[2])

    @property
    def metric_names(self) -> list[str]:
        self._by_metric()
        return list(self._names)


_ARCHES = ("x86_64", "amd64", "aarch64", "arm64", "ppc64le", "s390x")


def series_hardware(hardware_key: str, gpu_name: object = None, gpu_count: object = None,
                    cpu: object = None) -> str:
    """What a series is keyed by: what changes performance, and nothing that an update changes.

    GPU model and count; on a CPU host the CPU core count and model (``HostInfo.hardware_key``,
    ``cpu:16xAMD EPYC 7763``), or when the host did not say, the operating system and architecture
    out of the platform string (``cpu:Linux-6.18.44-...-x86_64-with-glibc2.36`` becomes
    ``cpu:Linux-x86_64``): a kernel or glibc update must not split every series and restart every
    baseline. The rest stays a host fact of each point (``Point.host``).
    """
    name, count, model = _text(gpu_name), _text(gpu_count), _text(cpu)
    if name and count and count not in ("0", "0.0"):
        return f"{int(float(count))}x{name}"
    if model:
        # The key the record wrote holds the core count when the host knew it; an older key holds the platform.
        return hardware_key if hardware_key.startswith("cpu:") and hardware_key.endswith(f"x{model}") else f"cpu:{model}"
    if hardware_key.startswith("cpu:"):
        words = hardware_key[4:].split("-")
        arch = next((w for w in reversed(words) if w in _ARCHES), None)  # the last: a kernel name may hold one
        return f"cpu:{words[0]}-{arch}" if arch else f"cpu:{words[0]}"
    return hardware_key


def host_changes(cp: CasePoints) -> list[tuple[int, str]]:
    """(point index, "driver 550 -> 560") for every host fact that changed from one point to the next."""
    out: list[tuple[int, str]] = []
    for i in range(1, len(cp.points)):
        before, after = cp.points[i - 1].host, cp.points[i].host
        moved = [f"{k} {before[k]} -> {after[k]}" for k in sorted(set(before) & set(after)) if before[k] != after[k]]
        if moved:
            out.append((i, "; ".join(moved)))
    return out


def _text(value: object) -> str | None:
    return None if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)


def _column(frame: pd.DataFrame, name: str) -> list[Any]:
    """A column as Python values, missing ones as None: one conversion per column, where iterating the
    frame's rows touches every Arrow-backed string once per row and field."""
    col = frame[name]
    return [None if v is None or (isinstance(v, float) and np.isnan(v)) else v for v in col.tolist()]


def _values_by_run(runs: pd.DataFrame, metrics: pd.DataFrame) -> list[dict[str, tuple[float, ...]] | None]:
    """A run's metric values (by its position in ``runs``) as one-trial tuples, in the order the metrics
    frame holds them, for the runs with numbers (pass or fail); None for the others."""
    import pandas as pd  # the caller has frames: pandas is loaded

    values_of: list[dict[str, tuple[float, ...]] | None] = [None] * len(runs)
    if metrics.empty:
        return values_of
    with_numbers = runs["outcome"].isin({Outcome.PASS.value, Outcome.FAIL.value}).to_numpy()
    pos = pd.Index(runs["run_id"]).get_indexer(metrics["run_id"])
    keep = pos >= 0
    keep[keep] = with_numbers[pos[keep]]
    for at, name, value in zip(pos[keep].tolist(), metrics["name"][keep].tolist(), metrics["value"][keep].tolist()):
        got = values_of[at]
        if got is None:
            got = values_of[at] = {}
        got[name] = (float(value),)
    return values_of


_Key = tuple[str, str, str]  # scenario, case, series hardware


def _group(c: dict[str, list[Any]], n: int) -> tuple[dict[_Key, dict[tuple[str, str], list[int]]], dict[_Key, str]]:
    """The runs' positions by series and then by point (batch, build); each series' scenario file."""
    hardware: dict[tuple[Any, ...], str] = {}
    cases: dict[_Key, dict[tuple[str, str], list[int]]] = {}
    files: dict[_Key, str] = {}
    for i in range(n):
        hk = (c["hardware_key"][i], c["gpu_name"][i], c["gpu_count"][i], c["cpu"][i])
        hw = hardware.get(hk)
        if hw is None:
            hw = hardware[hk] = series_hardware(str(hk[0]), *hk[1:])
        key = (c["scenario"][i], c["case_name"][i], hw)
        files.setdefault(key, c["scenario_file"][i])
        cases.setdefault(key, {}).setdefault((c["batch_id"][i], c["build_key"][i]), []).append(i)
    return cases, files


_OUTCOMES = {o.value: o for o in Outcome}


def _point(c: dict[str, list[Any]], pk: tuple[str, str], rows: list[int],
           values_of: list[dict[str, tuple[float, ...]] | None]) -> Point:
    """One point from its runs' positions (in trial order)."""
    first = rows[0]
    outcomes = c["outcome"]
    decided = [o for o in (_OUTCOMES.get(outcomes[r]) or Outcome(outcomes[r]) for r in rows) if o.decided]
    if len(rows) == 1:  # one trial (most nightly points): its values as they are (a dict of its own)
        metric_values: dict[str, tuple[float, ...]] = values_of[first] or {}
    else:
        values: dict[str, list[float]] = {}
        for r in rows:
            for name, value in (values_of[r] or {}).items():
                values.setdefault(name, []).extend(value)
        metric_values = {k: tuple(v) for k, v in values.items()}
    signature = c["signature"]
    sigs = {str(s) for s in (signature[r] for r in rows) if isinstance(s, str) and s}
    facts = {"driver": _text(c["driver_version"][first]), "CUDA": _text(c["cuda_version"][first]),
             "platform": _text(c["host_platform"][first]) or _text(c["hardware_key"][first])}
    artifacts = c["artifacts"]
    return Point(
        batch_id=str(pk[0]), batch_label=str(c["batch_label"][first]), started_at=str(c["batch_started_at"][first]),
        build_key=str(pk[1]), build_spec=str(c["build_spec"][first]),
        build_version=_text(c["build_version"][first]), build_commit=_text(c["build_commit"][first]),
        outcome=(decided[0] if len(decided) == 1 else most_telling(decided)) if decided else None,
        signatures=tuple(sorted(sigs)),
        metrics=metric_values,
        artifacts=tuple(str(artifacts[r]) for r in rows),
        host={k: v for k, v in facts.items() if v},
    )


_COLUMNS = ("scenario", "scenario_file", "case_name", "hardware_key", "batch_id", "build_key", "batch_label",
            "batch_started_at", "started_at", "build_spec", "build_version", "build_commit", "trial", "outcome",
            "signature", "run_id", "artifacts", "driver_version", "cuda_version", "gpu_name", "gpu_count", "cpu",
            "host_platform")


def case_points(runs: pd.DataFrame, metrics: pd.DataFrame) -> list[CasePoints]:
    """Every (scenario, case, hardware) with its points in order, from the store's frames
    (``Store.runs_frame``, ``Store.metrics_frame``); :func:`stored_case_points` reads the same from the
    store without frames."""
    if runs.empty:
        return []
    runs = runs[runs["batch_kind"].isin(SERIES_BATCH_KINDS)].reset_index(drop=True)
    if runs.empty:
        return []
    return _case_points({name: _column(runs, name) for name in _COLUMNS}, _values_by_run(runs, metrics))


def _series_select() -> Select[Any]:
    """The runs a series is made of, with the columns a point reads."""
    base = runs_select()
    return (base.with_only_columns(*[col for col in base.selected_columns if col.name in _COLUMNS])
            .where(batches.c.kind.in_(SERIES_BATCH_KINDS)))


def stored_case_points(store: Store) -> list[CasePoints]:
    """:func:`case_points` of the store, read as column lists and metric tuples through the driver's
    cursor: the same points (``tests/store/test_series_read.py``), without pandas (its import alone
    is most of a second) or a frame of 730k metric rows."""
    with collector_paused():
        return _read_case_points(store)


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a store's points are built, and while they are used (the
    dashboard): a year is millions of tuples and dicts (none in a cycle), and each of the collector's passes
    over them would walk them all again (a third of the build's time; after it, passes of 1.4 s in all,
    wall time at load 6, in a cached 730k-point dashboard). What a pause leaves is collected by the first
    pass after it."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _read_case_points(store: Store) -> list[CasePoints]:
    c = store.columns(_series_select())
    at = {run_id: i for i, run_id in enumerate(c["run_id"])}
    numbers = {Outcome.PASS.value, Outcome.FAIL.value}
    # Only decided runs that completed their checks give values (the module's docstring).
    with_numbers = [o in numbers for o in c["outcome"]]
    values_of: list[dict[str, tuple[float, ...]] | None] = [None] * len(at)
    for part in store.tuples(select(metrics.c.run_id, metrics.c.name, metrics.c.value)):
        for run_id, name, value in part:
            i = at.get(run_id)
            if i is None or not with_numbers[i]:
                continue
            got = values_of[i]
            if got is None:
                got = values_of[i] = {}
            got[name] = (float(value),)
    return _case_points(c, values_of)


def _case_points(c: dict[str, list[Any]], values_of: list[dict[str, tuple[float, ...]] | None]) -> list[CasePoints]:
    """The series of the runs in ``c`` (column lists) with their values (by run position).

    Column lists, not rows: a year of nightly data is 73k runs and 730k metric values; the rows are
    grouped by position (one integer per run), and a metric value joins its run by an index lookup,
    so the only Python loops are one pass over the runs and one over the values.
    """
    if not c["run_id"]:
        return []
    cases, files = _group(c, len(c["run_id"]))
    batch_start, start, trial = c["batch_started_at"], c["started_at"], c["trial"]
    out: list[CasePoints] = []
    for key in sorted(cases):
        parts = cases[key]
        order = sorted(parts, key=lambda k: (min(batch_start[r] for r in parts[k]), min(start[r] for r in parts[k])))
        points = [_point(c, pk, sorted(parts[pk], key=lambda r: trial[r]), values_of) for pk in order]
        out.append(CasePoints(str(key[0]), str(files[key]), str(key[1]), str(key[2]), tuple(points)))
    return out
