"""Series: one (scenario, case, metric, hardware) over builds in order, read from the store.

A point is one build in one batch (a night): its trials' raw values and outcomes. Points are
ordered by the batch's start. Only decided runs that completed their checks (pass, fail) give
metric values: infra and timeout runs never enter a metric series, and a crash has no numbers.
A series holds nightly runs only (``runs.kind``, ``SERIES_KINDS``) unless a caller asks for more
kinds: a one-off ``run`` and a pytest session are someone trying something, a ``compare`` is an A/B
experiment, ``bisect`` and ``minimize`` are searches that run old revisions and reduced cases after
the fact. None of them is a night of history, and each would put a point among the nights.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import operator
import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, overload

import numpy as np
from sqlalchemy import Select, select

from harness.records.metric_definitions import ACCEPT_RATE, METRICS, PHASE_ONLY, PHASE_SEPARATOR, position_of
from harness.records.outcome import MEASURED, Outcome, most_telling
from harness.series.steps import Rule
from harness.store.schema import batches, builds, hosts, metrics, runs
from harness.store.store import Store, runs_select
from harness.util.collector import collector_paused

if TYPE_CHECKING:  # the frames' path only: the dashboard and the review read the store without pandas
    import pandas as pd

__all__ = ["METRIC_RULES", "SERIES_KINDS", "CasePoints", "Point", "SeriesColumns", "Trials", "case_points",
           "host_changes", "rule_for", "series_hardware", "stored_case_points"]

SERIES_KINDS: tuple[str, ...] = ("nightly",)  # the run kinds (``runs.kind``) a series holds by default

# The metrics judged over history: the registry's with a minimum effect (2% acceptance length, 5% throughput
# and latency).
METRIC_RULES: Mapping[str, Rule] = {m.name: Rule(m.min_effect, m.higher_is_better)
                                    for m in METRICS.values() if m.min_effect is not None}


# A stateful workload's per-phase figures (NAME@PHASE, harness.workload.phases) are series of their own, judged
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
    sets: tuple[str, ...] = ()  # the --set overrides its runs ran with (a next step gives them again)

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
class SeriesColumns:
    """One metric's series of a case as arrays: the points that have it, each point's value (as
    ``Point.value`` gives it) and its trials, flat in point and trial order."""
    index: np.ndarray  # point indices, ascending (int64)
    values: np.ndarray  # float64, one a point
    counts: np.ndarray  # trials of each point (int64)
    flat: np.ndarray  # every trial's value (float64), point after point

    @property
    def one_trial(self) -> bool:
        """Every point one trial, its own value (most nightly series)."""
        return len(self.flat) == len(self.values)


class Trials(Sequence[tuple[float, ...]]):
    """The trials of each point of a series, as ``CasePoints.trials`` gives them: a tuple per point made
    when it is asked for, over the series' two arrays (``counts``, ``flat``), which the detector's
    screen and cache read at once instead of a tuple per point."""

    def __init__(self, counts: np.ndarray, flat: np.ndarray) -> None:
        self.counts = counts
        self.flat = flat
        self._ends = np.cumsum(counts)

    def __len__(self) -> int:
        return len(self.counts)

    @overload
    def __getitem__(self, i: int) -> tuple[float, ...]: ...

    @overload
    def __getitem__(self, i: slice) -> list[tuple[float, ...]]: ...

    def __getitem__(self, i: int | slice) -> tuple[float, ...] | list[tuple[float, ...]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        end = int(self._ends[i])
        return tuple(self.flat[end - int(self.counts[i]):end].tolist())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Trials):
            return bool(np.array_equal(self.counts, other.counts) and np.array_equal(self.flat, other.flat))
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # equal to a list of the same tuples, as the tuples' list was


def _series_of_points(points: Sequence[Point]) -> tuple[dict[str, SeriesColumns], list[str]]:
    """Every metric's series of points given one by one (a test's, an alert's): each point's values as
    ``Point.value`` gives them; the names of every metric a point names, with values or not."""
    got: dict[str, tuple[list[int], list[float], list[int], list[float]]] = {}
    names: set[str] = set()
    for i, p in enumerate(points):
        for name, vals in p.metrics.items():
            names.add(name)
            if not vals:
                continue
            s = got.setdefault(name, ([], [], [], []))
            s[0].append(i)
            s[1].append(float(vals[0]) if len(vals) == 1 else float(statistics.median(vals)))
            s[2].append(len(vals))
            s[3].extend(vals)
    series = {name: SeriesColumns(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=float),
                                  np.asarray(c, dtype=np.int64), np.asarray(d, dtype=float))
              for name, (a, b, c, d) in got.items()}
    return series, sorted(names)


class CasePoints:
    """One (scenario, case, hardware) and its points in order.

    Read from the store, the points are columns, not objects: a year of nightly data is 73k points
    and 730k values, and the dashboard draws every series but shows the fields of a handful of
    points (the last nights, the changes). Each metric's series is a set of arrays
    (:class:`SeriesColumns`); a point's fields are read from the runs' column lists where they are
    asked for (``column``); ``point(i)`` makes the one :class:`Point` a caller asks for, and
    ``points`` all of them (the review's event scan), once. Made from ``Point`` objects (a test, an
    alert's next step), the same questions are answered from them.
    """

    def __init__(self, scenario: str, scenario_file: str, case: str, hardware: str,
                 points: Sequence[Point] = (), *, table: _CaseTable | None = None) -> None:
        self.scenario = scenario
        self.scenario_file = scenario_file
        self.case = case
        self.hardware = hardware
        self._table = table
        self._given: tuple[Point, ...] | None = None if table is not None else tuple(points)
        self._made: dict[int, Point] = {}
        self._series: dict[str, SeriesColumns] | None = None
        self._names: list[str] = []

    def __repr__(self) -> str:
        return f"CasePoints({self.scenario!r}, {self.case!r}, {self.hardware!r}, {self.n_points} points)"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CasePoints):
            return NotImplemented
        return ((self.scenario, self.scenario_file, self.case, self.hardware, self.points)
                == (other.scenario, other.scenario_file, other.case, other.hardware, other.points))

    __hash__ = None  # type: ignore[assignment]

    @property
    def n_points(self) -> int:
        return len(self._given) if self._given is not None else self._table.n  # type: ignore[union-attr]

    def point(self, i: int) -> Point:
        """Point ``i`` (negative counts from the end), made once when the points are columns."""
        if self._given is not None:
            return self._given[i]
        n = self.n_points
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        got = self._made.get(i)
        if got is None:
            got = self._made[i] = self._table.point(i)  # type: ignore[union-attr]
        return got

    @functools.cached_property
    def points(self) -> tuple[Point, ...]:
        if self._given is not None:
            return self._given
        return tuple(self.point(i) for i in range(self.n_points))

    def column(self, name: str) -> list[Any]:
        """Field ``name`` of ``Point`` for every point, in order (``batch_id``, ``batch_label``,
        ``started_at``, ``build_key``, ``build_spec``, ``build_version``, ``build_commit``), without
        making the points."""
        if self._given is not None:
            return [getattr(p, name) for p in self._given]
        return self._table.column(name)  # type: ignore[union-attr]

    def build_labels(self) -> list[str]:
        """``Point.build_label`` of every point."""
        return [f"{spec} ({label})" for spec, label in zip(self.column("build_spec"), self.column("batch_label"))]

    def host_keys(self) -> list[Any]:
        """A value per point that is equal for two points whose ``Point.host`` is equal (and usually only then)."""
        if self._given is not None:
            return [p.host for p in self._given]
        return self._table.host_keys()  # type: ignore[union-attr]

    def _by_metric(self) -> dict[str, SeriesColumns]:
        if self._series is None:
            if self._given is not None:
                self._series, self._names = _series_of_points(self._given)
            else:
                self._series, self._names = self._table.series, self._table.names  # type: ignore[union-attr]
        return self._series

    def series_columns(self, metric: str) -> SeriesColumns | None:
        """``metric``'s series as arrays (not to be changed); None when no point has it."""
        return self._by_metric().get(metric)

    def series(self, metric: str) -> tuple[list[int], list[float]]:
        """(point indices, values) of the points that have ``metric``."""
        known = self._by_metric().get(metric)
        if known is None:
            return [], []
        return known.index.tolist(), known.values.tolist()  # lists of their own: a caller may change them

    def trials(self, metric: str) -> Trials:
        """The trials of each point of ``series(metric)``, in its order."""
        known = self._by_metric().get(metric)
        if known is None:
            return Trials(np.zeros(0, dtype=np.int64), np.zeros(0))
        return Trials(known.counts, known.flat)

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
    keys = cp.host_keys()
    for i in range(1, len(keys)):
        if keys[i] == keys[i - 1]:
            continue  # the same facts: nothing moved (the points are made only where something may have)
        before, after = cp.point(i - 1).host, cp.point(i).host
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


_Key = tuple[str, str, str]  # scenario, case, series hardware


class _Codes(dict[Any, int]):
    """A code for each distinct value, in the order of first sight (``map(codes.__getitem__, column)``:
    a column of 73k runs coded without a Python loop)."""

    def __missing__(self, value: Any) -> int:
        self[value] = code = len(self)
        return code


class _SeriesHardware(dict[tuple[Any, ...], str]):
    """``series_hardware`` of each distinct (hardware key, GPU name, GPU count, CPU), once."""

    def __missing__(self, key: tuple[Any, ...]) -> str:
        self[key] = hw = series_hardware(str(key[0]), *key[1:])
        return hw


def _coded(values: Iterator[Any] | Sequence[Any], codes: _Codes, n: int) -> np.ndarray:
    return np.fromiter(map(codes.__getitem__, values), dtype=np.int64, count=n)


def _ranks(column: Sequence[Any], n: int) -> np.ndarray:
    """Each value's rank among the column's distinct values (they sort as they compare)."""
    order = {v: i for i, v in enumerate(sorted(set(column)))}
    return np.fromiter(map(order.__getitem__, column), dtype=np.int64, count=n)


@dataclass(frozen=True)
class _Layout:
    """The runs in series order: by case (its key sorted), then point (by its first batch start and run
    start), then trial; ``bounds[k]:bounds[k + 1]`` of ``points`` are case ``k``'s points and
    ``offsets[p]:offsets[p + 1]`` of ``rows`` point ``p``'s runs."""
    keys: list[_Key]
    files: list[str]
    rows: np.ndarray  # run positions in series order
    offsets: np.ndarray  # per point (all cases), into rows; one more at the end
    bounds: np.ndarray  # per case, into the points; one more at the end


def _layout(c: dict[str, list[Any]], n: int) -> _Layout:
    """The runs grouped by series and point, and ordered, with column codes and sorts instead of a loop
    over the runs: a year of nightly data is 73k of them."""
    hardware = list(map(_SeriesHardware().__getitem__, zip(c["hardware_key"], c["gpu_name"], c["gpu_count"], c["cpu"])))
    case_codes = _Codes()
    case = _coded(zip(c["scenario"], c["case_name"], hardware), case_codes, n)
    keys: list[_Key] = list(case_codes)
    key_rank = np.empty(len(keys), dtype=np.int64)
    key_rank[sorted(range(len(keys)), key=keys.__getitem__)] = np.arange(len(keys))
    case_rank = key_rank[case]
    # A point is a (series, batch, build); its place in the series: its runs' first batch start, then
    # their first start, then first sight (the order the runs came in), as sorted() of the points did.
    point = _coded(zip(case.tolist(), c["batch_id"], c["build_key"]), _Codes(), n)
    n_points = int(point.max()) + 1
    big = np.iinfo(np.int64).max
    batch_start, run_start = np.full(n_points, big), np.full(n_points, big)
    np.minimum.at(batch_start, point, _ranks(c["batch_started_at"], n))
    np.minimum.at(run_start, point, _ranks(c["started_at"], n))
    point_case = np.empty(n_points, dtype=np.int64)
    point_case[point] = case_rank
    point_order = np.lexsort((np.arange(n_points), run_start, batch_start, point_case))
    place = np.empty(n_points, dtype=np.int64)
    place[point_order] = np.arange(n_points)
    trial = np.fromiter(c["trial"], dtype=np.int64, count=n)
    rows = np.lexsort((np.arange(n), trial, place[point]))  # within a point: by trial, then as read
    counts = np.bincount(place[point], minlength=n_points)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    per_case = np.bincount(point_case, minlength=len(keys))
    bounds = np.concatenate([[0], np.cumsum(per_case)]).astype(np.int64)
    firsts = np.full(len(keys), n, dtype=np.int64)
    np.minimum.at(firsts, case, np.arange(n))
    by_rank = sorted(range(len(keys)), key=keys.__getitem__)
    scenario_file = c["scenario_file"]
    return _Layout([keys[i] for i in by_rank], [scenario_file[int(firsts[i])] for i in by_rank], rows, offsets, bounds)


_OUTCOMES = {o.value: o for o in Outcome}


@dataclass(frozen=True)
class _Runs:
    """The runs of one read, shared by every case made of them: the column lists as read, and every
    metric value of a run with numbers (pass or fail) as arrays ordered by run, each run's in the
    order the store gave them (a point's ``metrics`` keeps that order, which the phase table shows)."""
    c: dict[str, list[Any]]
    names: list[str]  # a metric's code -> its name
    entry_start: np.ndarray  # run position -> its first entry; one more at the end (int64)
    entry_name: np.ndarray  # the entries' metric codes (int64)
    entry_value: np.ndarray  # the entries' values (float64)

    def values_of(self, run: int) -> dict[str, tuple[float, ...]]:
        lo, hi = int(self.entry_start[run]), int(self.entry_start[run + 1])
        names = self.names
        return {names[k]: (v,) for k, v in zip(self.entry_name[lo:hi].tolist(), self.entry_value[lo:hi].tolist())}


# Point fields read from the first run of the point, by the column that holds them.
_FIELD_COLUMNS = {"batch_id": "batch_id", "batch_label": "batch_label", "started_at": "batch_started_at",
                  "build_key": "build_key", "build_spec": "build_spec", "build_version": "build_version",
                  "build_commit": "build_commit"}
_OPTIONAL_FIELDS = ("build_version", "build_commit")


@dataclass(frozen=True)
class _CaseTable:
    """One case's points as positions into the runs: point ``i``'s runs (in trial order) are
    ``rows[offsets[i]:offsets[i + 1]]``; its fields are its first run's."""
    runs: _Runs
    first: list[int]
    offsets: np.ndarray
    rows: np.ndarray
    series: dict[str, SeriesColumns]
    names: list[str]

    @property
    def n(self) -> int:
        return len(self.first)

    def _gather(self, column: str) -> list[Any]:
        """The column's value at each point's first run (itemgetter: one C call, not a loop)."""
        if not self.first:
            return []
        got = operator.itemgetter(*self.first)(self.runs.c[column])
        return [got] if len(self.first) == 1 else list(got)

    def column(self, name: str) -> list[Any]:
        got = self._gather(_FIELD_COLUMNS[name])
        if name in _OPTIONAL_FIELDS:
            return [v if v.__class__ is str else _text(v) for v in got]
        return got if all(v.__class__ is str for v in got) else [str(v) for v in got]

    def host_keys(self) -> list[Any]:
        return list(zip(*(self._gather(name) for name in ("driver_version", "cuda_version", "host_platform",
                                                          "hardware_key"))))

    def point(self, i: int) -> Point:
        rows = self.rows[int(self.offsets[i]):int(self.offsets[i + 1])].tolist()
        return _point(self.runs, rows)


def _point(runs: _Runs, rows: list[int]) -> Point:
    """One point from its runs' positions (in trial order)."""
    c = runs.c
    first = rows[0]
    outcomes = c["outcome"]
    decided = [o for o in (_OUTCOMES.get(outcomes[r]) or Outcome(outcomes[r]) for r in rows) if o.decided]
    if len(rows) == 1:  # one trial (most nightly points): its values as they are
        metric_values: dict[str, tuple[float, ...]] = runs.values_of(first)
    else:
        values: dict[str, list[float]] = {}
        for r in rows:
            for name, value in runs.values_of(r).items():
                values.setdefault(name, []).extend(value)
        metric_values = {k: tuple(v) for k, v in values.items()}
    signature = c["signature"]
    sigs = {str(s) for s in (signature[r] for r in rows) if isinstance(s, str) and s}
    facts = {"driver": _text(c["driver_version"][first]), "CUDA": _text(c["cuda_version"][first]),
             "platform": _text(c["host_platform"][first]) or _text(c["hardware_key"][first])}
    artifacts = c["artifacts"]
    return Point(
        batch_id=str(c["batch_id"][first]), batch_label=str(c["batch_label"][first]),
        started_at=str(c["batch_started_at"][first]),
        build_key=str(c["build_key"][first]), build_spec=str(c["build_spec"][first]),
        build_version=_text(c["build_version"][first]), build_commit=_text(c["build_commit"][first]),
        outcome=(decided[0] if len(decided) == 1 else most_telling(decided)) if decided else None,
        signatures=tuple(sorted(sigs)),
        metrics=metric_values,
        artifacts=tuple(str(artifacts[r]) for r in rows),
        host={k: v for k, v in facts.items() if v},
        sets=_sets(c["set_overrides"][first]),
    )


def _sets(raw: Any) -> tuple[str, ...]:
    """``runs.set_overrides`` (a JSON list, or NULL for none) as the texts; a value not of that shape is none."""
    if not raw:
        return ()
    try:
        got = json.loads(str(raw))
    except ValueError:
        return ()
    return tuple(str(x) for x in got if isinstance(x, str)) if isinstance(got, list) else ()


_COLUMNS = ("scenario", "scenario_file", "case_name", "hardware_key", "batch_id", "build_key", "batch_label",
            "batch_started_at", "started_at", "build_spec", "build_version", "build_commit", "trial", "outcome",
            "signature", "run_id", "artifacts", "driver_version", "cuda_version", "gpu_name", "gpu_count", "cpu",
            "host_platform", "set_overrides")


class _Entries:
    """Metric values (run id, name, value) taken part by part, as run positions, name codes and values:
    a year of nightly data is 730k of them, never held as rows or as a dict per run."""

    def __init__(self, c: dict[str, list[Any]]) -> None:
        self.at = {run_id: i for i, run_id in enumerate(c["run_id"])}
        numbers = {o.value for o in MEASURED}
        # Only decided runs that completed their checks give values (the module's docstring).
        self.with_numbers = np.fromiter((o in numbers for o in c["outcome"]), dtype=bool, count=len(c["outcome"]))
        self.codes: dict[str, int] = {}
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def add(self, run_ids: Sequence[Any], names: Sequence[Any], values: Sequence[Any]) -> None:
        if not run_ids:
            return
        at, codes = self.at, self.codes
        pos = np.fromiter(map(at.get, run_ids, itertools.repeat(-1)), dtype=np.int64, count=len(run_ids))
        for name in set(names) - codes.keys():
            codes[name] = len(codes)
        code = np.fromiter(map(codes.__getitem__, names), dtype=np.int64, count=len(names))
        value = np.asarray(values, dtype=float)
        keep = pos >= 0
        keep[keep] = self.with_numbers[pos[keep]]
        self.parts.append((pos[keep], code[keep], value[keep]))

    def runs(self, c: dict[str, list[Any]]) -> _Runs:
        if self.parts:
            pos, code, value = (np.concatenate(x) for x in zip(*self.parts))
        else:
            pos, code, value = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
        order = np.argsort(pos, kind="stable")  # by run, each run's values in the store's order
        start = np.searchsorted(pos[order], np.arange(len(self.with_numbers) + 1))
        names = sorted(self.codes, key=self.codes.__getitem__)
        return _Runs(c, [str(n) for n in names], start.astype(np.int64), code[order], value[order])


def case_points(runs: pd.DataFrame, metrics: pd.DataFrame, kinds: Sequence[str] = SERIES_KINDS) -> list[CasePoints]:
    """Every (scenario, case, hardware) with its points in order, from the store's frames
    (``Store.runs_frame``, ``Store.metrics_frame``), of the runs of ``kinds``; :func:`stored_case_points`
    reads the same from the store without frames."""
    if runs.empty:
        return []
    runs = runs[runs["run_kind"].isin(list(kinds))].reset_index(drop=True)
    if runs.empty:
        return []
    c = {name: _column(runs, name) for name in _COLUMNS}
    entries = _Entries(c)
    if not metrics.empty:
        entries.add(metrics["run_id"].tolist(), metrics["name"].tolist(), metrics["value"].tolist())
    return _case_points(entries.runs(c))


def _series_select(kinds: Sequence[str] = SERIES_KINDS) -> Select[Any]:
    """The runs a series is made of, with the columns a point reads."""
    base = runs_select()
    return (base.with_only_columns(*[col for col in base.selected_columns if col.name in _COLUMNS])
            .where(runs.c.kind.in_(list(kinds))))


# The columns of a series' runs that are their batch's, build's and host's: read from those small tables
# once and joined in by key, not read again with every run (a year of nightly data is 73k runs of 365
# batches and builds). By the column the series' rows name them and the table's own.
_JOINED = ((batches, "batch_id", (("batch_label", "label"), ("batch_started_at", "started_at"))),
           (builds, "build_key", (("build_spec", "spec"), ("build_version", "version"), ("build_commit", "commit"))),
           (hosts, "host_key", (("gpu_name", "gpu_name"), ("gpu_count", "gpu_count"),
                                ("driver_version", "driver_version"), ("cuda_version", "cuda_version"),
                                ("cpu", "cpu"), ("host_platform", "platform"))))


_REPEATED = ("batch_id", "scenario", "scenario_file", "case_name", "build_key", "host_key", "hardware_key",
             "outcome", "signature", "set_overrides")
# The run columns a point is made of (``_point``, ``_CaseTable``); the others only group and order the runs.
_POINT_COLUMNS = frozenset({"batch_id", "batch_label", "batch_started_at", "build_key", "build_spec",
                            "build_version", "build_commit", "outcome", "signature", "driver_version",
                            "cuda_version", "host_platform", "hardware_key", "artifacts", "set_overrides"})


def _series_columns(store: Store, kinds: Sequence[str] = SERIES_KINDS) -> dict[str, list[Any]]:
    """``store.columns(_series_select(kinds))``: the same columns of the same runs, in the same order (the
    runs' scan), with the batches', builds' and hosts' columns looked up by key."""
    wanted = [runs.c[name] for name in _COLUMNS if name in runs.c] + [runs.c.host_key]
    query = select(*wanted).join(batches, batches.c.id == runs.c.batch_id).where(runs.c.kind.in_(list(kinds)))
    c: dict[str, list[Any]] = {col.name: [] for col in wanted}
    # The driver makes a string per row and field; a column of a few hundred distinct values (365 batches,
    # 200 cases) keeps one object per value, part by part as read: a third of the runs' memory at 1.5M points.
    seen: dict[str, dict[Any, Any]] = {name: {} for name in _REPEATED}
    for part in store.tuples(query):
        for name, values in zip(c, zip(*part)):
            known = seen.get(name)
            c[name].extend(values if known is None else map(known.setdefault, values, values))
    keep: list[int] | None = None
    for table, by, cols in _JOINED:
        key = table.c.key if "key" in table.c else table.c.id
        small = store.columns(select(key, *[table.c[own] for _, own in cols]))
        rows = {k: i for i, k in enumerate(small[key.name])}
        missing = set(c[by]) - rows.keys()
        if missing:  # a run whose build or host row is gone: left out, as the join would
            keep = [i for i in (keep if keep is not None else range(len(c[by]))) if c[by][i] not in missing]
        at = [rows.get(k, 0) for k in c[by]]
        for name, own in cols:
            c[name] = list(map(small[own].__getitem__, at)) if at and small[own] else [None] * len(at)
    if keep is not None:
        c = {name: [col[i] for i in keep] for name, col in c.items()}
    del c["host_key"]
    return c


def stored_case_points(store: Store, kinds: Sequence[str] = SERIES_KINDS) -> list[CasePoints]:
    """:func:`case_points` of the store (the runs of ``kinds``: nightly runs unless asked), read as column
    lists and metric tuples through the driver's cursor: the same points (``tests/store/test_series_read.py``),
    without pandas (its import alone is most of a second) or a frame of 730k metric rows."""
    with collector_paused():
        return _read_case_points(store, kinds)


def _read_case_points(store: Store, kinds: Sequence[str]) -> list[CasePoints]:
    c = _series_columns(store, kinds)
    entries = _Entries(c)
    for part in store.tuples(select(metrics.c.run_id, metrics.c.name, metrics.c.value)):
        run_ids, names, values = zip(*part)
        entries.add(run_ids, names, values)
    return _case_points(entries.runs(c))


def _case_points(runs: _Runs) -> list[CasePoints]:
    """The series of the runs read (column lists) with their values (arrays by run).

    Column lists and arrays, not rows or objects: a year of nightly data is 73k runs and 730k metric
    values. The runs are grouped and ordered by codes and sorts (``_layout``); every value then finds
    its case, point and trial by array lookups, and each (case, metric) series is a slice of the
    values sorted by case, metric and trial order.
    """
    c = runs.c
    n_runs = len(c["run_id"])
    if not n_runs:
        return []
    lay = _layout(c, n_runs)
    # The cases keep only what their points are made of (the run ids and start times go with the read).
    runs = dataclasses.replace(runs, c={k: v for k, v in c.items() if k in _POINT_COLUMNS})
    n_points = len(lay.offsets) - 1
    point_of_slot = np.repeat(np.arange(n_points, dtype=np.int64), np.diff(lay.offsets))
    case_of_point = np.repeat(np.arange(len(lay.keys), dtype=np.int64), np.diff(lay.bounds))
    run_case = np.empty(n_runs, dtype=np.int64)
    run_point = np.empty(n_runs, dtype=np.int64)  # the point's index within its case
    run_rank = np.empty(n_runs, dtype=np.int64)  # the run's place in series order
    run_case[lay.rows] = case_of_point[point_of_slot]
    run_point[lay.rows] = point_of_slot - lay.bounds[case_of_point[point_of_slot]]
    run_rank[lay.rows] = np.arange(n_runs, dtype=np.int64)
    per_case = _series_by_case(runs, run_case, run_point, run_rank, len(lay.keys))
    firsts = lay.rows[lay.offsets[:-1]].tolist()
    out: list[CasePoints] = []
    for k, key in enumerate(lay.keys):
        lo, hi = int(lay.bounds[k]), int(lay.bounds[k + 1])
        series = per_case.get(k, {})
        table = _CaseTable(runs, firsts[lo:hi], lay.offsets[lo:hi + 1] - lay.offsets[lo],
                           lay.rows[int(lay.offsets[lo]):int(lay.offsets[hi])], series, sorted(series))
        out.append(CasePoints(str(key[0]), str(lay.files[k]), str(key[1]), str(key[2]), table=table))
    return out


def _series_by_case(runs: _Runs, run_case: np.ndarray, run_point: np.ndarray, run_rank: np.ndarray,
                    n_cases: int) -> dict[int, dict[str, SeriesColumns]]:
    """Every case's series: the values sorted by (case, metric, trial order) and cut where the case or
    the metric changes; a point of one trial is its value, a point of more the trials' median."""
    run = np.repeat(np.arange(len(runs.entry_start) - 1, dtype=np.int64), np.diff(runs.entry_start))
    if not len(run):
        return {}
    n_names = max(1, len(runs.names))
    group = run_case[run] * n_names + runs.entry_name
    order = np.lexsort((run_rank[run], group))
    group, point, flat = group[order], run_point[run][order], runs.entry_value[order]
    # A new point where the group or the point changes; a new series where the group changes.
    new_point = np.ones(len(group), dtype=bool)
    new_point[1:] = (group[1:] != group[:-1]) | (point[1:] != point[:-1])
    starts = np.flatnonzero(new_point)
    counts = np.diff(np.append(starts, len(group)))
    values = flat[starts].copy()
    for j in np.flatnonzero(counts > 1).tolist():  # a few points of several trials: statistics.median, as Point.value
        s = int(starts[j])
        values[j] = float(statistics.median(flat[s:s + int(counts[j])].tolist()))
    p_group, p_point = group[starts], point[starts]
    cuts = np.flatnonzero(np.diff(p_group)) + 1
    bounds = [0, *cuts.tolist(), len(p_group)]
    trial_bounds = np.append(starts, len(group))
    out: dict[int, dict[str, SeriesColumns]] = {}
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        g = int(p_group[lo])
        out.setdefault(g // n_names, {})[runs.names[g % n_names]] = SeriesColumns(
            p_point[lo:hi], values[lo:hi], counts[lo:hi], flat[int(trial_bounds[lo]):int(trial_bounds[hi])])
    return out
