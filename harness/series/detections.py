"""Detections: every series' findings, with the detector's state cached in the store per series.

The detector (``steps.Tracker``) is sequential: a night's verdict depends on every night before it,
so a year of history is a year of nights replayed per series. What it decided is a function of the
points it was given, so its state after the first ``n`` points is cached in the store's
``detections`` table, beside a digest of those points' inputs (values and trials) and a digest of
the detector itself (the source of ``steps.py``). A later review with the same first ``n`` points
restores the state and pushes only the nights since; any other history (a point recorded late
into the past, a changed tolerance, another detector) does not match and is replayed in full. The
findings are the same either way: ``detect`` replays exactly the pushes a restored tracker had.

A store that cannot take the cache (read-only) still gets its findings, computed in full.
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.series import screen, steps
from harness.series.points import CasePoints, Trials, rule_for
from harness.series.steps import Finding, Rule, Tracker, detect
from harness.store.store import Store
from harness.util.bounded_read import read_bytes
from harness.util.clock import now_iso
from harness.util.errors import InfraError
from harness.util.kill import dies_with_parent

__all__ = ["DETECTOR", "Detector", "SeriesFindings", "case_findings", "findings_of", "series_key"]

log = logging.getLogger(__name__)

# The detector's identity: its source. A change to any rule or threshold is another detector.
DETECTOR = hashlib.sha256(read_bytes(Path(steps.__file__), "source")).hexdigest()[:32]
# What a tracker's state holds beyond its inputs (which are the series' own points, replayed).
_INPUTS = ("rule", "y", "k", "dev")

CaseKey = tuple[str, str, str]


@dataclass(frozen=True)
class SeriesFindings:
    metric: str
    indices: tuple[int, ...]  # point index of each value
    findings: tuple[Finding, ...]  # Finding.index counts values of the series, not points


# How a series' findings are had: (metric, rule, values, trials) -> findings; ``steps.detect`` by default,
# the store's cache in ``findings_of`` below.
Detector = Callable[[str, Rule, Sequence[float], Sequence[Sequence[float]]], Sequence[Finding]]


def case_findings(cp: CasePoints, tolerances: Mapping[str, float] | None = None, *,
                  detector: Detector | None = None) -> list[SeriesFindings]:
    out = []
    for metric in cp.metric_names:
        rule = rule_for(metric, tolerances)
        if rule is None:
            continue
        idx, values = cp.series(metric)
        if len(values) >= 4:
            trials = cp.trials(metric)
            found = detector(metric, rule, values, trials) if detector else detect(values, rule, trials)
            out.append(SeriesFindings(metric, tuple(idx), tuple(found)))
    return out


def series_key(cp: CasePoints, metric: str, rule: Rule) -> str:
    """The cache's key of one series under one rule (a tolerance is part of what was decided)."""
    parts = [cp.scenario, cp.case, cp.hardware, metric, repr(rule.min_effect), rule.higher_is_better]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:40]


def _inputs_digest(values: Sequence[float], trials: Sequence[Sequence[float]], n: int) -> str:
    """A digest of the first ``n`` points' values and trials, bit for bit."""
    h = hashlib.sha256(np.asarray(values[:n], dtype=float).tobytes())
    if isinstance(trials, Trials):  # a series' arrays: the same bytes without a tuple per point
        counts = np.asarray(trials.counts[:n], dtype=np.int64)
        h.update(counts.tobytes())
        h.update(np.asarray(trials.flat[:int(counts.sum())], dtype=float).tobytes())
        return h.hexdigest()[:40]
    h.update(np.asarray([len(t) for t in trials[:n]], dtype=np.int64).tobytes())
    h.update(np.asarray([v for t in trials[:n] for v in t], dtype=float).tobytes())
    return h.hexdigest()[:40]


def _encode(value: Any) -> Any:
    if isinstance(value, Finding):
        return {"finding": asdict(value)}
    if isinstance(value, tuple):
        return {"tuple": [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"a tracker's state holds a {type(value).__name__}")


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if "finding" in value:
            return Finding(**value["finding"])
        return tuple(_decode(v) for v in value["tuple"])
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


# The state's key for the tracker's suspicious tail after its points (``Tracker.suspicious``, which is a
# function of the state): a series with no night since is answered from the cache without computing it.
# A row written before the key existed has no tail; the tail is computed then.
_TAIL = "_suspicious_tail"
_UNKNOWN: Any = object()  # no tail cached

# What the cache gives a series: the tracker restored (None: replay from the first point), the points it
# has, and the suspicious tail after them (_UNKNOWN when not cached).
Restored = tuple[Tracker | None, int, Any]


def _fields(tracker: Tracker) -> dict[str, Any] | None:
    """The tracker's decisions (not its inputs), encoded for JSON; None when it holds what JSON cannot."""
    try:
        return {k: _encode(v) for k, v in vars(tracker).items() if k not in _INPUTS}
    except TypeError:
        return None


def _state(tracker: Tracker) -> str | None:
    """The tracker's decisions (not its inputs) as JSON; None when it holds what JSON cannot."""
    fields = _fields(tracker)
    try:
        return None if fields is None else json.dumps(fields)
    except (TypeError, ValueError):
        return None


def _cached_state(fields: dict[str, Any] | None, tail: Finding | None) -> str | None:
    """The state cached: the tracker's decisions and its suspicious tail, as JSON."""
    if fields is None:
        return None
    try:
        return json.dumps({**fields, _TAIL: _encode(tail)})
    except (TypeError, ValueError):
        return None


def _restore(rule: Rule, values: Sequence[float], trials: Sequence[Sequence[float]], n: int,
             state: str) -> tuple[Tracker | None, Any]:
    """A tracker as it was after the first ``n`` points, and its cached tail; (None, _UNKNOWN) when the
    stored state is not its kind."""
    tracker = Tracker(rule)
    try:
        saved = {k: _decode(v) for k, v in json.loads(state).items()}
    except (ValueError, TypeError, KeyError):
        return None, _UNKNOWN
    tail = saved.pop(_TAIL, _UNKNOWN)
    if set(saved) != set(vars(tracker)) - set(_INPUTS) or not (tail is _UNKNOWN or tail is None
                                                               or isinstance(tail, Finding)):
        return None, _UNKNOWN
    screen.add_points(tracker, values, trials, 0, n)
    vars(tracker).update(saved)
    return tracker, tail


def _from_cache(rule: Rule, values: Sequence[float], trials: Sequence[Sequence[float]],
                cached: Mapping[str, Any] | None) -> Restored:
    """The tracker restored from the cached state where it still holds, the points it has and its tail;
    (None, 0, _UNKNOWN) when the series must be replayed from its first point."""
    n = len(values)
    if cached is not None and cached["detector"] == DETECTOR and 0 < int(cached["points"]) <= n:
        m = int(cached["points"])
        if cached["inputs"] == _inputs_digest(values, trials, m):
            tracker, tail = _restore(rule, values, trials, m, str(cached["state"]))
            if tracker is not None:
                return tracker, m, tail
    return None, 0, _UNKNOWN


def _detect(rule: Rule, values: Sequence[float], trials: Sequence[Sequence[float]],
            restored: Restored, hot: np.ndarray | None = None
            ) -> tuple[list[Finding], dict[str, Any] | None]:
    """``steps.detect`` from the cached state where it still holds (``restored``: ``_from_cache``'s answer);
    the findings and the row to cache. ``hot``: the series' hot nights (``screen.hot_nights``) when it is
    replayed from its first point."""
    n = len(values)
    tracker, start, cached_tail = restored
    if tracker is None and hot is not None:
        tracker, start = screen.replay(rule, values, trials, hot), 0
        pushed = n
    else:
        tracker = tracker or Tracker(rule)
        pushed = start
    for i in range(pushed, n):
        tracker.push(values[i], trials[i])
    if start == n and cached_tail is not _UNKNOWN:  # nothing new, and the tail is cached: as it was
        return [*tracker.findings, *([cached_tail] if cached_tail is not None else [])], None
    # The decisions before the tail is computed (suspicious() refits the noise model: the state cached is
    # the one the pushes left, as a replay leaves it).
    fields = _fields(tracker) if start < n else None  # nothing new: the cached row stays as it is
    tail = tracker.suspicious()
    state = _cached_state(fields, tail) if start < n else None
    findings = [*tracker.findings, *([tail] if tail is not None else [])]
    if state is None:
        return findings, None
    return findings, {"detector": DETECTOR, "points": n, "inputs": _inputs_digest(values, trials, n), "state": state}


_Job = tuple[CaseKey, str, Rule, Sequence[float], Sequence[Sequence[float]]]


# A cold store (filled elsewhere, or a changed detector) replays every series from its first point: a year of 1400
# series is seconds of one core, most of it the screen of every series' nights and the series with a finding early
# (every night after it is pushed). Such replays are independent and their results the same bits wherever they run,
# so they are spread over the cores the process may use, in forked workers (they read the series from the parent's
# memory; only the findings and the rows to cache come back). Each worker screens its own batch of series at once
# (``screen.hot_nights``: a night's row reads its own series only, so a batch's rows are those of the whole set; the
# margin covers the rounding either way, as it does for ``replay``'s own screen of one series), then replays them.
# Below this many replays a pool costs more than it saves.
PARALLEL_MIN_REPLAYS = 200
_MAX_WORKERS = 4
_BATCHES_PER_WORKER = 16  # small batches: a series with an early finding costs a hundred times one without
# A series to replay from its first point: (rule, values, trials, what the cache gave, whether it can be screened).
_Cold = tuple[Rule, Sequence[float], Sequence[Sequence[float]], Restored, bool]
_Result = tuple[list[Finding], dict[str, Any] | None]
_WORK: list[_Cold] = []  # the replays a forked worker reads by index (set only while its pool runs)


def _screen_and_detect(items: Sequence[_Cold]) -> list[_Result]:
    """``_detect`` of each item, the screenable ones' hot nights (``screen.hot_nights``) found together first."""
    screened = [i for i, item in enumerate(items) if item[4]]
    hot: list[np.ndarray | None] = [None] * len(items)
    found = screen.hot_nights([np.asarray(items[i][1], dtype=float) for i in screened],
                              [steps.large_floor(items[i][0]) for i in screened])
    for i, h in zip(screened, found):
        hot[i] = h
    return [_detect(rule, values, trials, restored, h) for (rule, values, trials, restored, _), h in zip(items, hot)]


def _detect_batch(bounds: tuple[int, int]) -> list[_Result]:
    return _screen_and_detect(_WORK[bounds[0]:bounds[1]])


def _workers() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return min(cores, _MAX_WORKERS)


def _detect_many(work: list[_Cold]) -> list[_Result]:
    """``_screen_and_detect`` of ``work``, in order: in batches over forked workers when there are enough of them and
    more than one core, else here. A pool that cannot start leaves the work to this process."""
    workers = _workers()
    # Forked only from a process of one thread: a lock another thread held at the fork would stay held in the child.
    if (len(work) < PARALLEL_MIN_REPLAYS or workers < 2 or "fork" not in multiprocessing.get_all_start_methods()
            or threading.active_count() > 1):
        return _screen_and_detect(work)
    global _WORK
    _WORK = work
    size = max(1, len(work) // (workers * _BATCHES_PER_WORKER))
    batches = [(lo, min(lo + size, len(work))) for lo in range(0, len(work), size)]
    try:
        # Each worker is killed by the kernel when this process ends, however it ends: none outlives it.
        with multiprocessing.get_context("fork").Pool(workers, initializer=dies_with_parent(os.getpid())) as pool:
            return [result for batch in pool.map(_detect_batch, batches, chunksize=1) for result in batch]
    except OSError as exc:
        log.warning("detection not spread over %d workers (%s): replayed here", workers, exc)
        return _screen_and_detect(work)
    finally:
        _WORK = []


def findings_of(store: Store | None, cases: Sequence[CasePoints],
                tolerances: Mapping[str, Mapping[str, float]] | None = None) -> dict[CaseKey, list[SeriesFindings]]:
    """Per (scenario, case, hardware): what ``case_findings`` says, through the store's cache.

    ``tolerances`` by scenario, as the review takes them. Without a store, nothing is cached.
    """
    tol = tolerances or {}
    if store is None:
        return {(cp.scenario, cp.case, cp.hardware): case_findings(cp, tol.get(cp.scenario)) for cp in cases}
    try:
        known = store.detection_rows()
    except InfraError as exc:
        log.warning("detection cache not read, every series replayed: %s", exc)
        known = {}
    now = now_iso()
    by_key = {(cp.scenario, cp.case, cp.hardware): cp for cp in cases}
    # First the series themselves (case_findings says which, with which rule), then every cold one
    # screened at once, then each series' findings.
    jobs: list[_Job] = []
    for key, cp in by_key.items():
        def collect(metric: str, rule: Rule, values: Sequence[float], trials: Sequence[Sequence[float]],
                    key: CaseKey = key) -> list[Finding]:
            jobs.append((key, metric, rule, values, trials))
            return []

        case_findings(cp, tol.get(cp.scenario), detector=collect)
    # Each series' cached state restored once (its digest and replayed inputs are most of a cached night's cost).
    restored = {(key, metric): _from_cache(rule, values, trials, known.get(series_key(by_key[key], metric, rule)))
                for key, metric, rule, values, trials in jobs}
    # The series replayed from their first point, screened and replayed at once (spread over the cores when there
    # are many).
    cold = [(key, metric, (rule, values, trials, restored[(key, metric)], screen.screenable(trials, values)))
            for key, metric, rule, values, trials in jobs if restored[(key, metric)][0] is None]
    replayed = dict(zip(((key, metric) for key, metric, _ in cold), _detect_many([w for _, _, w in cold])))
    fresh: list[dict[str, Any]] = []
    out: dict[CaseKey, list[SeriesFindings]] = {}
    for key, cp in by_key.items():
        def cached(metric: str, rule: Rule, values: Sequence[float], trials: Sequence[Sequence[float]],
                   cp: CasePoints = cp, key: CaseKey = key) -> list[Finding]:
            skey = series_key(cp, metric, rule)
            done = replayed.get((key, metric))
            findings, row = done if done is not None else _detect(rule, values, trials, restored[(key, metric)])
            if row is not None:
                fresh.append({"series_key": skey, **row, "updated_at": now})
            return findings

        out[key] = case_findings(cp, tol.get(cp.scenario), detector=cached)
    try:
        store.put_detections(fresh)
    except InfraError as exc:
        log.warning("detection cache not written (the findings stand): %s", exc)
    return out
