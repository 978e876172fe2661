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
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import Float, Integer, Select, String, Text, select

from harness.atomic import replace_with
from harness.bounded_read import walk_files
from harness.errors import UserError
from harness.metric_registry import METRICS
from harness.record import RunRecord, read_record
from harness.store.schema import metrics
from harness.store.store import Batch, Store, metric_value, runs_select, schema_problems

__all__ = ["EXPORT_FORMATS", "EXPORT_ROWS", "ImportReport", "export_frame", "export_store", "find_records", "hud_records",
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
    bounded and does not follow links to folders (:func:`harness.bounded_read.walk_files`)."""
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


def import_folders(store: Store, paths: list[Path]) -> ImportReport:
    """Ingest the run folders under ``paths``. One bad file never sinks the batch: a file that is not a
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
    recorded = sum(store.record_many(recs, batch) for batch, recs in by_batch.items())
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
    for rows in store.stream(query, rows=EXPORT_ROWS):
        yield pd.DataFrame.from_records([tuple(r) for r in rows], columns=list(rows[0]._fields))


def export_frame(store: Store) -> pd.DataFrame:
    """Long format: one row per (run, metric); runs without metrics keep one row with an empty metric.
    The whole store at once: for a small store, or a test; the exports stream."""
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


def _hud_metric(first: Mapping[Any, Any], values: list[float], outcomes: list[str]) -> dict[str, Any]:
    return {"name": str(first["metric"]), "benchmark_values": values, "target_value": 0.0,
            "extra_info": {"outcomes": ",".join(outcomes), **_metric_facts(str(first["metric"]))}}


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


def hud_records(frame: pd.DataFrame, *, repo: str = "sgl-project/sglang") -> list[dict[str, Any]]:
    """The ``oss_ci_benchmark_v3`` shape: a record per (batch, case, build, hardware, metric)."""
    rows = frame.dropna(subset=["metric", "value"]).sort_values([*_HUD_KEY, "trial"], kind="stable")
    return [{**_hud_common(first, repo), "metric": _hud_metric(first, values, outcomes)}
            for first, values, outcomes in _hud_groups(rows.to_dict("records"))]


def _write_hud(store: Store, tmp: Path, repo: str = "sgl-project/sglang") -> int:
    """The records as one JSON array, one record a line, written record by record into ``tmp`` (the
    temporary file of :func:`harness.atomic.replace_with`): json's C encoder (an indented dump runs its
    pure-Python one, 5x the time at 730k records, and a third more bytes)."""
    query = _export_select(store, (*_HUD_KEY, "trial", "run_id"), with_metrics_only=True, columns=_HUD_COLUMNS)
    rows = (r._mapping for part in store.stream(query, rows=EXPORT_ROWS) for r in part)
    n = 0
    with tmp.open("w", encoding="utf-8") as f:
        shared: tuple[Any, ...] | None = None
        head = ""
        for first, values, outcomes in _hud_groups(rows):
            here = tuple(first[k] for k in _COMMON_FIELDS)
            if here != shared:  # a run's every metric shares all but the last key: its text is encoded once
                shared, head = here, json.dumps(_hud_common(first, repo))[:-1]
            f.write(("[\n" if n == 0 else ",\n") + head + ', "metric": ' + json.dumps(_hud_metric(first, values, outcomes))
                    + "}")
            n += 1
        f.write("\n]\n" if n else "[]\n")
    return n


def _arrow_schema() -> pa.Schema:
    """The Parquet file's columns: the export's, typed as the store types them (every part the same)."""
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
    out.parent.mkdir(parents=True, exist_ok=True)
    # Through a temporary file and a rename (replace_with), never through an open of ``out``: that
    # would follow a link planted there, and write into a device or FIFO; a failed export leaves ``out``
    # as it was.
    if fmt == "hud":
        write: Callable[[Path], int] = functools.partial(_write_hud, store)
    else:
        query = _export_select(store, _EXPORT_ORDER, with_metrics_only=False)
        write = functools.partial(_write_parquet if fmt == "parquet" else _write_csv, store, query)
    written: list[int] = []
    replace_with(out, lambda tmp: written.append(write(tmp)))
    return written[0]


def _write_parquet(store: Store, query: Select[Any], tmp: Path) -> int:
    schema = _arrow_schema()
    n = 0
    with pq.ParquetWriter(tmp, schema) as writer:
        for rows in store.stream(query, rows=EXPORT_ROWS):
            columns = list(zip(*rows)) if rows else [()] * len(schema)
            writer.write_table(pa.table([pa.array(c, type=f.type) for c, f in zip(columns, schema)], schema=schema))
            n += len(rows)
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
