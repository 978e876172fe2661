"""``store import`` (artifact folders into the store) and ``store export`` (parquet, csv, hud).

An export is one row per (run, metric) in long format, with the run's build, host and batch beside
it (pyarrow writes Parquet). ``hud`` writes the PyTorch HUD's ``oss_ci_benchmark_v3`` record shape
(pytorch/test-infra, ``clickhouse_db_schema/oss_ci_benchmark_v3/schema.sql``): one record per
(batch, scenario case, build, hardware, metric) whose ``metric.benchmark_values`` holds every trial's
raw value.

Every export streams: the store sorts (``ORDER BY``, byte order of the text on both databases), the
rows arrive in parts of ``EXPORT_ROWS`` and each part is written before the next is read, so what an
export holds at once does not grow with the store (a year of nightly data is 730k rows).
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Float, Integer, Select, String, Text, select

from harness.records.metric_definitions import METRICS
from harness.records.run_record import RunRecord, read_record
from harness.store.schema import metrics
from harness.store.store import Batch, Store, metric_value, runs_select, schema_problems
from harness.util.atomic import replace_with
from harness.util.bounded_read import walk_files
from harness.util.errors import UserError

if TYPE_CHECKING:  # imported where they are used: a HUD export needs neither (pandas alone is most of a second)
    import pandas as pd
    import pyarrow as pa

__all__ = ["EXPORT_FORMATS", "EXPORT_ROWS", "ImportReport", "export_frame", "export_store", "find_records", "hud_incidents",
           "hud_records", "series_nights",
           "import_folders"]

log = logging.getLogger(__name__)

EXPORT_FORMATS = ("parquet", "csv", "hud")


@dataclass(frozen=True)
class ImportReport:
    found: int
    recorded: int
    skipped: tuple[str, ...]  # "PATH: why" for each result.json (or value in one) that was not imported

    @property
    def some_skipped(self) -> bool:
        return bool(self.skipped)


def find_records(paths: list[Path]) -> Iterator[Path]:
    """Every ``result.json`` under the given folders (or the files themselves), sorted; the walk is
    bounded and does not follow links to folders (:func:`harness.util.bounded_read.walk_files`)."""
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            yield from sorted(walk_files(path, "result.json"))
        elif path.is_dir():
            yield from sorted(walk_files(path.resolve(), "result.json"))  # the folder named, not links below it
        elif os.path.lexists(path):
            yield path  # a file, or a link, FIFO or device: the bounded reader takes it or says why not
        else:
            raise UserError(f"{path}: no such file or folder")


def _import_batch(record: RunRecord) -> Batch:
    # Imported runs have no batch: one per build and day stands for a nightly.
    day = record.started_at[:10] or "unknown"
    return Batch(id=f"import-{record.build.spec}-{day}"[:64], kind="import",
                 label=f"{day} {record.build.spec}", started_at=record.started_at or day)


def import_folders(store: Store, paths: list[Path], *, kind: str = "nightly") -> ImportReport:
    """Ingest the run folders under ``paths`` as runs of ``kind`` (a nightly's by default: they enter the series;
    ``run``, ``compare``, ... keep them apart). One bad file never sinks the batch: a file that is not a
    run record, or whose record does not fit the schema, is skipped and reported with its path and why;
    a metric that is not a finite number is left out of the metrics rows (and reported) while the run
    is imported."""
    by_batch: dict[Batch, list[RunRecord]] = {}
    skipped: list[str] = []
    found = 0
    for path in find_records(paths):
        found += 1
        try:
            record = read_record(path)
        except UserError as exc:
            skipped.append(str(exc))
            continue
        problems = schema_problems(record)
        if problems:
            skipped.append(f"{path}: not imported: {'; '.join(problems)}")
            continue
        bad = sorted(str(k) for k, v in record.metrics.items()
                     if metric_value(v) is None and not isinstance(v, (str, type(None))))
        if bad:
            skipped.append(f"{path}: metric(s) {', '.join(bad)} not finite numbers; the run is imported without them")
        by_batch.setdefault(_import_batch(record), []).append(record)
    recorded = sum(store.record_many(recs, batch, kind=kind) for batch, recs in by_batch.items())
    return ImportReport(found=found, recorded=recorded, skipped=tuple(skipped))


# The export's order: the frame's own, then the run id (ties are otherwise the database's to break).
_EXPORT_ORDER = ("batch_started_at", "scenario", "case_name", "trial", "metric", "run_id")
# A HUD record's key, then its values in trial order.
_HUD_KEY = ("batch_id", "scenario", "case_name", "build_key", "hardware_key", "metric")
EXPORT_ROWS = 20_000


# What a HUD record reads of a row (the database sorts narrower rows for it).
_HUD_COLUMNS = ("batch_id", "scenario", "case_name", "build_key", "hardware_key", "trial", "run_id", "outcome",
                "batch_started_at", "batch_label", "build_commit", "build_version", "build_spec", "build_kind",
                "hostname", "cpu", "gpu_name", "gpu_count", "driver_version", "cuda_version", "role", "experiment")


def _export_select(store: Store, order: Sequence[str], *, with_metrics_only: bool,
                   columns: Sequence[str] | None = None) -> Select[Any]:
    """The runs with their metrics (long format), sorted by ``order`` in byte order of the text;
    ``columns`` of the runs (default: all)."""
    base = runs_select().subquery("r")
    m = metrics.alias("m")
    joined = base.join(m, m.c.run_id == base.c.run_id, isouter=not with_metrics_only)
    picked = list(base.c) if columns is None else [base.c[name] for name in columns]
    cols = [*picked, m.c.name.label("metric"), m.c.value]
    by = {c.key: c for c in cols}
    collation = 'C' if store.dialect == "postgresql" else "BINARY"  # Python's order of str, on both
    keys = []
    for name in order:
        col = by[name]
        keys.append((col.collate(collation) if isinstance(col.type, (String, Text)) else col).asc().nulls_last())
    return select(*cols).select_from(joined).order_by(*keys)


def _columns() -> list[str]:
    return [str(c.key) for c in runs_select().selected_columns] + ["metric", "value"]


def _parts(store: Store, query: Select[Any]) -> Iterator[pd.DataFrame]:
    import pandas as pd

    for rows in store.stream(query, rows=EXPORT_ROWS):
        yield pd.DataFrame.from_records([tuple(r) for r in rows], columns=list(rows[0]._fields))


def export_frame(store: Store) -> pd.DataFrame:
    """Long format: one row per (run, metric); runs without metrics keep one row with an empty metric.
    The whole store at once: for a small store, or a test; the exports stream."""
    import pandas as pd

    parts = list(_parts(store, _export_select(store, _EXPORT_ORDER, with_metrics_only=False)))
    if not parts:
        return pd.DataFrame(columns=_columns())
    return pd.concat(parts, ignore_index=True)


@functools.lru_cache(maxsize=4096)  # one start per night: parsed once, not once per record
def _epoch(text: str) -> int:
    try:
        return int(datetime.fromisoformat(text).timestamp())
    except ValueError:
        return 0


def _text(value: Any) -> str:
    """A missing text as the empty string (a frame's NaN or the database's NULL alike)."""
    return "" if value is None or (isinstance(value, float) and value != value) else str(value)


def _hud_common(first: Mapping[Any, Any], repo: str) -> dict[str, Any]:
    """A record less its ``metric``: what one run's every metric shares."""
    return {
        "timestamp": _epoch(str(first["batch_started_at"])),
        "schema_version": "v3",
        "name": f"sglang-repro {first['scenario']}",
        "repo": repo,
        "head_branch": "",
        "head_sha": _text(first["build_commit"]),
        "workflow_id": 0, "run_attempt": 1, "job_id": 0,
        "runners": [{
            "name": _text(first["hostname"]), "type": first["hardware_key"], "cpu_info": _text(first["cpu"]),
            "cpu_count": 0, "mem_info": "", "avail_mem_in_gb": 0, "gpu_info": _text(first["gpu_name"]),
            "gpu_count": int(first["gpu_count"] or 0), "gpu_mem_info": "", "avail_gpu_mem_in_gb": 0,
            "extra_info": {"driver_version": _text(first["driver_version"]),
                           "cuda_version": _text(first["cuda_version"])},
        }],
        "benchmark": {"name": str(first["scenario"]), "mode": "inference", "dtype": "",
                      "extra_info": {"case": str(first["case_name"]), "batch": str(first["batch_label"]),
                                     "role": _text(first["role"])}},
        "model": {"name": str(first["case_name"]), "type": "sglang-server", "backend": str(first["build_kind"]),
                  "origins": ["sglang-repro"], "extra_info": {"experiment": str(first["experiment"])}},
        "inputs": {},
        "dependencies": {"sglang": {"repo": repo, "branch": "", "sha": _text(first["build_commit"]),
                                    "version": _text(first["build_version"]),
                                    "extra_info": {"spec": str(first["build_spec"])}}},
    }


def _hud_metric(first: Mapping[Any, Any], values: list[float], outcomes: list[str],
                incidents: Mapping[tuple[str, ...], dict[str, str]] | None = None) -> dict[str, Any]:
    mark = (incidents or {}).get(_incident_key(first, str(first["metric"])))
    return {"name": str(first["metric"]), "benchmark_values": values, "target_value": 0.0,
            "extra_info": {"outcomes": ",".join(outcomes), **(mark or {}), **_metric_facts(str(first["metric"]))}}


def _incident_key(fields: Mapping[Any, Any], metric: str) -> tuple[str, ...]:
    return (str(fields["batch_label"]), str(fields["scenario"]), str(fields["case_name"]),
            str(fields["hardware_key"]), metric)


def hud_incidents(alert_rows: Iterable[Mapping[str, Any]],
                  nights: Mapping[tuple[str, str, str], Sequence[tuple[str, str]]] | None = None,
                  ) -> dict[tuple[str, ...], dict[str, str]]:
    """Per (night, scenario, case, hardware, metric) of every night an alert's incident was open: its
    fingerprint, kind, state and names over its nights (``level-change (night-07) -> drift (night-12)``),
    for the HUD records of those nights. ``nights``: per (scenario, case, hardware), its nights in order as
    (label, started at) (``series_nights``); open from the first bad build's night through the night it
    was resolved on (the newest night while it is open; for ``store ack`` or ``store resolve``, which
    record a date, the last night started by that date). Without ``nights``, or when the first bad night
    is not among them, only the first bad night is marked. Where two incidents of a series overlap (a
    later change superseded an open one), the later one's mark wins. A transient reached no one and is
    not marked. Every value is a string: the HUD's ``metric.extra_info`` is ``Map(String, String)``
    (pytorch/test-infra ``clickhouse_db_schema/oss_ci_benchmark_v3/schema.sql``)."""
    out: dict[tuple[str, ...], dict[str, str]] = {}
    for r in alert_rows:
        if r["metric"] is None or r["state"] == "transient":
            continue
        bad = str(r["first_bad"])
        night = bad[bad.rfind("(") + 1:-1] if bad.endswith(")") and "(" in bad else bad
        try:
            names = [(str(n["night"]), str(n["name"])) for n in json.loads(str(r["names"]))] if r.get("names") else []
        except (ValueError, KeyError, TypeError):
            names = []
        state = f"resolved: {r['resolution']}" if r["state"] == "resolved" and r.get("resolution") else str(r["state"])
        mark = {"incident": str(r["incident"] or r["fingerprint"]), "incident_kind": str(r["kind"]),
                "incident_state": state,
                "incident_names": " -> ".join(f"{k} ({n})" for n, k in names) or f"{r['kind']} ({night})"}
        series = (str(r["scenario"]), str(r["case_name"]), str(r["hardware_key"]))
        for label in _open_nights(night, r, (nights or {}).get(series, ())):
            out[(label, series[0], series[1], series[2], str(r["metric"]))] = mark
    return out


def _open_nights(first: str, row: Mapping[str, Any], nights: Sequence[tuple[str, str]]) -> list[str]:
    """The labels of the nights an alert's incident was open, from its first bad night ``first``."""
    labels = [label for label, _ in nights]
    if first not in labels:
        return [first]
    start = labels.index(first)
    closed = str(row.get("closed_at") or "")
    if row["state"] == "open":
        end = len(labels) - 1
    elif closed in labels:
        end = labels.index(closed)
    elif closed.startswith(("ack ", "resolve ")):  # the CLI's close: the day, not a night
        day = closed.split()[-1]
        end = max((i for i, (_, at) in enumerate(nights) if str(at)[:10] <= day), default=start)
    else:
        end = start
    return labels[start:max(start, end) + 1]


def series_nights(store: Store, series: Iterable[tuple[str, str, str]]) -> dict[tuple[str, str, str], list[tuple[str, str]]]:
    """Per (scenario, case, hardware) of ``series``: its nights in order as (batch label, batch started at)."""
    wanted = set(series)
    if not wanted:
        return {}
    base = runs_select().subquery("r")
    query = (select(base.c.scenario, base.c.case_name, base.c.hardware_key, base.c.batch_label, base.c.batch_started_at)
             .where(base.c.scenario.in_(sorted({s for s, _, _ in wanted}))).distinct()
             .order_by(base.c.batch_started_at, base.c.batch_label))
    out: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
    for part in store.tuples(query):
        for scenario, case, hardware, label, started in part:
            key = (str(scenario), str(case), str(hardware))
            if key in wanted:
                out.setdefault(key, []).append((str(label), str(started)))
    return out


# The fields ``_hud_common`` reads: equal fields, equal text.
_COMMON_FIELDS = ("batch_started_at", "scenario", "build_commit", "hostname", "hardware_key", "cpu", "gpu_name",
                  "gpu_count", "driver_version", "cuda_version", "case_name", "batch_label", "role", "build_kind",
                  "experiment", "build_version", "build_spec")


def _hud_groups(rows: Iterable[Mapping[Any, Any]]) -> Iterator[tuple[Mapping[Any, Any], list[float], list[str]]]:
    """(first row, values, outcomes) per run of rows with equal HUD keys (rows sorted by the key, then the trial)."""
    first: Mapping[Any, Any] | None = None
    key: tuple[Any, ...] = ()
    values: list[float] = []
    outcomes: list[str] = []
    for row in rows:
        here = tuple(row[k] for k in _HUD_KEY)
        if first is not None and here != key:
            yield first, values, outcomes
        if first is None or here != key:
            first, key, values, outcomes = row, here, [], []
        values.append(float(row["value"]))
        outcomes.append(str(row["outcome"]))
    if first is not None:
        yield first, values, outcomes


def hud_records(frame: pd.DataFrame, *, repo: str = "sgl-project/sglang",
                incidents: Mapping[tuple[str, ...], dict[str, str]] | None = None) -> list[dict[str, Any]]:
    """The ``oss_ci_benchmark_v3`` shape: a record per (batch, case, build, hardware, metric); the record of
    every night an incident was open carries it (``hud_incidents``) in ``metric.extra_info``: ``incident``,
    ``incident_kind``, ``incident_state``, ``incident_names``."""
    rows = frame.dropna(subset=["metric", "value"]).sort_values([*_HUD_KEY, "trial"], kind="stable")
    return [{**_hud_common(first, repo), "metric": _hud_metric(first, values, outcomes, incidents)}
            for first, values, outcomes in _hud_groups(rows.to_dict("records"))]


def _runs_query(store: Store, order: Sequence[str], columns: Sequence[str] | None = None) -> Select[Any]:
    """The runs (no metrics), sorted by ``order`` in byte order of the text; ``columns`` (default: all)."""
    base = runs_select().subquery("r")
    picked = list(base.c) if columns is None else [base.c[name] for name in columns]
    by = {c.key: c for c in picked}
    collation = 'C' if store.dialect == "postgresql" else "BINARY"  # Python's order of str, on both
    keys = [(by[name].collate(collation) if isinstance(by[name].type, (String, Text)) else by[name]).asc().nulls_last()
            for name in order]
    return select(*picked).order_by(*keys)


_Metrics = dict[str, list[tuple[str, float]]]


def _row_key(query: Select[Any], fields: Sequence[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The ``fields`` of a row of ``query`` as a tuple, by position (a row's lookup by name costs more)."""
    names = [str(c.key) for c in query.selected_columns]
    pos = [names.index(k) for k in fields]
    return lambda row: tuple(row[i] for i in pos)


def _run_groups(store: Store, query: Select[Any], group: Sequence[str]) -> Iterator[tuple[list[Any], _Metrics]]:
    """The runs of ``query`` (sorted so that equal ``group`` fields are adjacent) in parts of whole groups,
    each with its runs' metrics: a group (a point's trials) is never cut by a part's end, and a part holds
    at most ``EXPORT_ROWS // 10`` runs beyond one group (about ``EXPORT_ROWS`` metric values)."""
    pending: list[Any] = []
    pending_metrics: _Metrics = {}
    key = _row_key(query, group)
    run_id = _row_key(query, ["run_id"])
    for part, by_run in store.stream_runs_with_metrics(query, runs_per_part=max(1, EXPORT_ROWS // 10)):
        rows = [*pending, *part]
        known = {**pending_metrics, **by_run}
        last = key(rows[-1])
        cut = len(rows)
        while cut > 0 and key(rows[cut - 1]) == last:
            cut -= 1
        pending = rows[cut:]  # the last group may go on in the next part
        pending_metrics = {rid: known.pop(rid) for rid in (run_id(r)[0] for r in pending) if rid in known}
        if cut:
            yield rows[:cut], known
    if pending:
        yield pending, pending_metrics


def _runs_of(rows: list[Any], key: Callable[[Any], tuple[Any, ...]]) -> Iterator[list[Any]]:
    """The runs of adjacent rows with equal ``key``."""
    start = 0
    for i in range(1, len(rows) + 1):
        if i == len(rows) or key(rows[i]) != key(rows[start]):
            yield rows[start:i]
            start = i


def _json_number(v: float) -> str:
    """A float as ``json.dumps`` writes it."""
    return float.__repr__(v) if v == v and v not in (float("inf"), float("-inf")) else json.dumps(v)


@functools.lru_cache(maxsize=1024)
def _hud_metric_text(name: str) -> tuple[bytes, bytes]:
    """The text of ``_hud_metric``'s dict around its values and outcomes (a few metric names: made once each)."""
    facts = _metric_facts(name)
    return (('{"name": ' + json.dumps(name) + ', "benchmark_values": [').encode(),
            ((", " + json.dumps(facts)[1:-1] if facts else "") + "}}").encode())


@functools.lru_cache(maxsize=4096)
def _outcomes_text(outcomes: str) -> bytes:
    """json's text of a record's outcomes (a few distinct ones: ``pass``, ``pass,pass,fail``)."""
    return json.dumps(outcomes).encode()


def _write_hud(store: Store, tmp: Path, repo: str = "sgl-project/sglang") -> int:
    """The records as one JSON array, one record a line, the bytes ``json.dumps`` of each ``hud_records``
    record gives, written point by point into ``tmp`` (the temporary file of
    :func:`harness.util.atomic.replace_with`). The runs come sorted by the point (the key less the metric) and
    the trial, their metrics by run id; a point's records are its metric names in order. A run's shared
    fields are encoded once by json (its C encoder), a record's metric around its values from a template;
    json's text is ASCII (``ensure_ascii``), so the pieces are bytes, joined once per point and written
    as they are (a year of records is most of a GB: every copy of it counts)."""
    point = _HUD_KEY[:-1]
    query = _runs_query(store, (*point, "trial", "run_id"), _HUD_COLUMNS)
    key = _row_key(query, point)
    rows = store.alert_rows()
    marked = {(str(r["scenario"]), str(r["case_name"]), str(r["hardware_key"])) for r in rows
              if r["metric"] is not None and r["state"] != "transient"}
    incidents = hud_incidents(rows, series_nights(store, marked))
    n = 0
    with tmp.open("wb") as f:
        for rows, metrics_of in _run_groups(store, query, point):
            for trials in _runs_of(rows, key):
                n = _write_point(f, trials, metrics_of, repo, n, incidents)
        f.write(b"\n]\n" if n else b"[]\n")
    return n


_RUN_ID, _OUTCOME = _HUD_COLUMNS.index("run_id"), _HUD_COLUMNS.index("outcome")


def _write_point(f: Any, trials: Sequence[Any], metrics_of: _Metrics, repo: str, n: int,
                 incidents: Mapping[tuple[str, ...], dict[str, str]] | None = None) -> int:
    """One point's records (a metric each, its trials' values in trial order); the records written so far.
    ``incidents``: ``hud_incidents`` of the store (a few: looked up only when there are any)."""
    by_name: dict[str, tuple[int, list[float], list[str]]] = {}
    for at, run in enumerate(trials):
        outcome = str(run[_OUTCOME])
        for name, value in metrics_of.get(run[_RUN_ID], ()):
            got = by_name.get(name)
            if got is None:
                got = by_name[name] = (at, [], [])
            got[1].append(float(value))
            got[2].append(outcome)
    heads: dict[int, bytes] = {}
    out: list[bytes] = []
    for name in sorted(by_name):
        first, values, outcomes = by_name[name]
        head = heads.get(first)
        if head is None:
            fields = dict(zip(_HUD_COLUMNS, trials[first]))
            head = heads[first] = json.dumps(_hud_common(fields, repo))[:-1].encode()
        pre, post = _hud_metric_text(str(name))
        nums = ", ".join(map(float.__repr__, values)) if all(map(math.isfinite, values)) else \
            ", ".join(map(_json_number, values))
        mark = incidents.get(_incident_key(dict(zip(_HUD_COLUMNS, trials[first])), str(name))) if incidents else None
        tail = b", " + json.dumps(mark)[1:-1].encode() if mark else b""
        out += (b"[\n" if n == 0 else b",\n", head, b', "metric": ', pre, nums.encode(),
                b'], "target_value": 0.0, "extra_info": {"outcomes": ', _outcomes_text(",".join(outcomes)), tail,
                post, b"}")
        n += 1
    f.write(b"".join(out))
    return n


def _arrow_schema() -> pa.Schema:
    """The Parquet file's columns: the export's, typed as the store types them (every part the same)."""
    import pyarrow as pa

    fields = []
    for col in [*runs_select().selected_columns, metrics.c.name.label("metric"), metrics.c.value]:
        kind = col.type
        typ = pa.int64() if isinstance(kind, Integer) else pa.float64() if isinstance(kind, Float) else pa.string()
        fields.append(pa.field(str(col.key), typ))
    return pa.schema(fields)


def _metric_facts(name: str) -> dict[str, str]:
    """The registry's unit and better direction of a metric, for a reader that does not know the harness."""
    m = METRICS.get(name)
    return {} if m is None else {"unit": m.unit, "better": m.better.value}


def export_store(store: Store, fmt: str, out: Path) -> int:
    """Write the store to ``out`` as ``fmt``; the number of rows (records for hud) written."""
    if fmt not in EXPORT_FORMATS:
        raise UserError(f"--format {fmt}: not one of {', '.join(EXPORT_FORMATS)}")
    from harness.util.output_path import make_folder

    make_folder(out.parent, "--output: its folder")
    # Through a temporary file and a rename (replace_with), never through an open of ``out``: that
    # would follow a link planted there, and write into a device or FIFO; a failed export leaves ``out``
    # as it was.
    if fmt == "hud":
        write: Callable[[Path], int] = functools.partial(_write_hud, store)
    elif fmt == "parquet":
        write = functools.partial(_write_parquet, store)
    else:
        write = functools.partial(_write_csv, store, _export_select(store, _EXPORT_ORDER, with_metrics_only=False))
    written: list[int] = []
    replace_with(out, lambda tmp: written.append(write(tmp)))
    return written[0]


def _write_parquet(store: Store, tmp: Path) -> int:
    """The long rows in the export's order (``_EXPORT_ORDER``), a row group per part of runs: the runs
    come sorted by the order less the metric, their metrics by run id; within a group of runs equal up
    to the trial, the rows are sorted by metric (a run without metrics: one row, last) and run id. The
    runs' columns become Arrow arrays once per part and are taken per row (a run has ~10 metrics)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _arrow_schema()
    run_fields = schema.names[:-2]
    group = [k for k in _EXPORT_ORDER if k not in ("metric", "run_id")]
    query = _runs_query(store, (*group, "run_id"))
    key, run_id = _row_key(query, group), run_fields.index("run_id")
    n = 0
    with pq.ParquetWriter(tmp, schema) as writer:
        for rows, metrics_of in _run_groups(store, query, group):
            take: list[int] = []
            names: list[str | None] = []
            values: list[float | None] = []
            at = 0
            for runs in _runs_of(rows, key):
                ids = [r[run_id] for r in runs]
                # (metric, run id) order; a run's position in the part rises with its run id here
                long: list[tuple[str | None, int, float | None]] = sorted(
                    (name, i, value) for i, rid in enumerate(ids, at) for name, value in metrics_of.get(rid, ()))
                long += [(None, i, None) for i, rid in enumerate(ids, at) if not metrics_of.get(rid)]
                take += [r[1] for r in long]
                names += [r[0] for r in long]
                values += [r[2] for r in long]
                at += len(runs)
            columns = list(zip(*rows))
            part = pa.table([pa.array(c, type=schema.field(k).type) for c, k in zip(columns, run_fields)],
                            names=run_fields).take(pa.array(take, type=pa.int64()))
            table = pa.table([*part.columns, pa.array(names, type=pa.string()), pa.array(values, type=pa.float64())],
                             schema=schema)
            writer.write_table(table)
            n += len(table)
    return n


def _write_csv(store: Store, query: Select[Any], tmp: Path) -> int:
    n = 0
    with tmp.open("w", encoding="utf-8", newline="") as f:
        for part in _parts(store, query):
            part.to_csv(f, index=False, header=n == 0)
            n += len(part)
        if n == 0:
            f.write(",".join(_columns()) + "\n")
    return n
