"""The results store: run records in SQLite (default) or PostgreSQL, through SQLAlchemy Core.

SQLite is opened in WAL mode with a busy timeout and ``BEGIN IMMEDIATE`` transactions, so that
several processes (pytest-xdist workers, parallel CI jobs on one runner) write to one file without
"database is locked" and without losing a run; PostgreSQL serves a fleet of runners. Recording is
idempotent on the run id: recording the same run twice leaves one row.
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, Float, Integer, Row, Select, String, Table, create_engine, event, select, update
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from harness.records.run_record import RunRecord, record_from_dict, record_to_dict
from harness.store.migrations import current_version, latest_version, migrate
from harness.store.schema import RUN_KINDS, alerts, batches, builds, detections, hosts, metrics, runs
from harness.store.url import check_libpq_files, redact_url, store_url
from harness.util.clock import now_iso_exact
from harness.util.errors import InfraError, UserError
from harness.util.redact import redact_everywhere, secret_flag_values, secret_values, shape_values

if TYPE_CHECKING:  # pandas is imported by the readers only: a writer (every run) does not pay for it
    import pandas as pd

__all__ = ["BATCH_KINDS", "RUN_KINDS", "Batch", "Store", "build_key", "host_key", "metric_value", "new_batch", "open_store",
           "check_sqlite_file", "runs_select", "schema_problems"]

BATCH_KINDS = ("nightly", "run", "compare", "pytest", "import", "bisect", "minimize")
_SQLITE_BUSY_MS = 60_000


def _now() -> str:
    return now_iso_exact()


@dataclass(frozen=True)
class Batch:
    """One invocation that records runs; a series orders its points by ``started_at``."""

    id: str
    kind: str
    label: str
    started_at: str


def new_batch(kind: str, label: str | None = None, *, started_at: str | None = None) -> Batch:
    if kind not in BATCH_KINDS:
        raise ValueError(f"batch kind {kind!r} is not one of {', '.join(BATCH_KINDS)}")
    when = started_at or _now()
    return Batch(id=f"{kind}-{when[:19].replace(':', '')}-{secrets.token_hex(4)}", kind=kind,
                 label=label or when[:19], started_at=when)


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:24]


def build_key(record: RunRecord) -> str:
    b = record.build
    return _digest(b.kind, b.spec, b.version, b.commit)


def host_key(record: RunRecord) -> str:
    h = record.host
    return _digest(h.hostname, [(g.name, g.compute_capability) for g in h.gpus], h.driver_version,
                   h.cuda_version, h.cpu, h.platform)


def _dialect(name: str) -> Any:
    """SQLAlchemy's dialect module for an upsert, imported when one is written: PostgreSQL's (with its
    async drivers) is a third of a second of every command's start that only reads a SQLite store."""
    if name == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql
    from sqlalchemy.dialects import sqlite

    return sqlite


def _insert_ignore(conn: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """INSERT ... ON CONFLICT DO NOTHING, in the dialect at hand (both have it)."""
    if not rows:
        return
    dialect = _dialect(conn.dialect.name)
    conn.execute(dialect.insert(table).on_conflict_do_nothing(), list(rows))


def run_kind(batch: Batch, kind: str | None = None) -> str:
    """What made a run of ``batch`` (``RUN_KINDS``): ``kind`` when the caller says (an import of one-off runs),
    else the batch's own; an import's runs are a nightly's unless said otherwise (a nightly's run folders
    brought in from CI were what an import stood for)."""
    got = kind or ("nightly" if batch.kind == "import" else batch.kind)
    if got not in RUN_KINDS:
        raise ValueError(f"run kind {got!r} is not one of {', '.join(RUN_KINDS)}")
    return got


def _rows(record: RunRecord, batch: Batch, recorded_at: str, search_key: str | None,
          kind: str) -> tuple[dict[str, Any], ...]:
    b, h = record.build, record.host
    gpu_names = sorted({g.name for g in h.gpus})
    ccs = sorted({g.compute_capability for g in h.gpus if g.compute_capability})
    build_row = {"key": build_key(record), "kind": b.kind, "spec": b.spec, "version": b.version,
                 "commit": b.commit}
    host_row = {"key": host_key(record), "hardware_key": h.hardware_key, "hostname": h.hostname,
                "gpu_name": "+".join(gpu_names) or None, "gpu_count": len(h.gpus),
                "driver_version": h.driver_version, "cuda_version": h.cuda_version,
                "compute_capability": "+".join(ccs) or None, "cpu": h.cpu, "platform": h.platform}
    # A record may come from elsewhere (store import): its argv's secret flags, its env's secret variables and
    # every value recognisable by shape in it are redacted wherever they appear, whoever wrote it.
    known = (secret_flag_values(record.server.argv) | secret_values(record.server.env)
             | shape_values(record.reason) | shape_values(" ".join(record.server.argv)))
    run_row = {
        "run_id": record.run_id, "batch_id": batch.id, "scenario": record.scenario.name,
        "scenario_file": record.scenario.file, "case_name": record.case.name,
        "case_values": json.dumps(dict(record.case.values), sort_keys=True, default=str),
        "role": record.build.role, "build_key": build_row["key"], "host_key": host_row["key"],
        "hardware_key": h.hardware_key, "trial": record.trial, "outcome": record.outcome.value,
        "signature": record.signature, "phase": record.phase.value if record.phase else None,
        "reason": redact_everywhere(record.reason, known), "started_at": record.started_at, "duration_s": record.duration_s,
        "recorded_at": recorded_at, "artifacts": record.artifacts, "experiment": record.experiment,
        "harness_version": record.harness_version, "kind": kind,
        "set_overrides": json.dumps(list(record.scenario.sets)) if record.scenario.sets else None,
        # By value too: a secret a server was given may sit in any field (a reason, an excerpt, a flag).
        "record": redact_everywhere(json.dumps(record_to_dict(record), sort_keys=True, default=str), known),
    }
    if search_key is not None:  # only a search's runs name the column (a run recorded elsewhere leaves it NULL)
        run_row["search_key"] = search_key
    return build_row, host_row, run_row


_INT32 = (-(2**31), 2**31 - 1)  # PostgreSQL's INTEGER; SQLite would take 64 bits


def metric_value(value: object) -> float | None:
    """A metric as the store keeps it: a finite number, else None (NaN is NULL on SQLite, a value on
    PostgreSQL; neither fits ``metrics.value NOT NULL`` the same way, so a non-finite value is not stored
    as a row: the run's record keeps it)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def schema_problems(record: RunRecord) -> list[str]:
    """Why the record's rows would not fit the schema on one backend or the other, one reason each.

    The limits are the ones PostgreSQL enforces and SQLite does not (VARCHAR lengths, 32-bit INTEGER,
    NUL characters in text, finite FLOAT for a NOT NULL column), checked here so both refuse alike.
    """
    probe = Batch(id="", kind="", label="", started_at="")
    problems: list[str] = []
    for table, row in zip((builds, hosts, runs), _rows(record, probe, "", None, "run")):
        for name, value in row.items():
            column = table.c[name]
            where = f"{table.name}.{name}"
            if isinstance(value, str):
                if isinstance(column.type, String) and column.type.length and len(value) > column.type.length:
                    problems.append(f"{where} is {len(value)} characters, over the schema's {column.type.length}")
                if "\x00" in value:
                    problems.append(f"{where} holds a NUL character")
            elif isinstance(column.type, Integer) and isinstance(value, int) and not _INT32[0] <= value <= _INT32[1]:
                problems.append(f"{where} = {value} is out of the schema's 32-bit range")
            elif isinstance(column.type, Float) and isinstance(value, float) and not math.isfinite(value):
                problems.append(f"{where} = {value} is not a finite number")
    for name in record.metrics:
        if len(str(name)) > 64:
            problems.append(f"metric name {str(name)[:40]!r}... is over the schema's 64 characters")
    return problems


class Store:
    """An open store. Use :func:`open_store`; close with :meth:`close` (or ``with``)."""

    def __init__(self, engine: Engine, url: URL, *, read_only: bool = False) -> None:
        self.engine = engine
        self.url = url
        self.where = redact_url(url)
        self.read_only = read_only  # opened where it cannot be written (open_store's read_only): caches are not saved

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.engine.dispose()

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def _begin(self, action: str) -> Iterator[Connection]:
        try:
            with self.engine.begin() as conn:
                yield conn
        except SQLAlchemyError as exc:
            raise InfraError(f"store {self.where}: {action}: {_first_line(exc)}") from None

    # ------------------------------------------------------------------ writing

    def record(self, record: RunRecord, batch: Batch, *, search_key: str | None = None) -> bool:
        """Record one run; False when a run with that id was already there (nothing changes)."""
        return self.record_many([record], batch, search_key=search_key) == 1

    def record_many(self, records: Iterable[RunRecord], batch: Batch, *, search_key: str | None = None,
                    kind: str | None = None) -> int:
        """Record runs of one batch in one transaction; the number that were new. ``search_key``: what a
        search (bisect, minimize) asked these runs to answer (:meth:`searched` finds them by it); ``kind``:
        what made them (:func:`run_kind`; the batch's kind by default)."""
        recorded_at = _now()
        made_by = run_kind(batch, kind)
        build_rows: dict[str, dict[str, Any]] = {}
        host_rows: dict[str, dict[str, Any]] = {}
        run_rows: list[dict[str, Any]] = []
        metric_rows: list[dict[str, Any]] = []
        for record in records:
            b, h, r = _rows(record, batch, recorded_at, search_key, made_by)
            build_rows[b["key"]] = b
            host_rows[h["key"]] = h
            run_rows.append(r)
            metric_rows += [{"run_id": record.run_id, "name": name, "value": metric_value(value)}
                            for name, value in record.metrics.items() if metric_value(value) is not None]
        if not run_rows:
            return 0
        with self._begin(f"cannot record {len(run_rows)} run(s)") as conn:
            _insert_ignore(conn, batches, [{"id": batch.id, "kind": batch.kind, "label": batch.label,
                                            "started_at": batch.started_at}])
            _insert_ignore(conn, builds, list(build_rows.values()))
            _insert_ignore(conn, hosts, list(host_rows.values()))
            ids = [r["run_id"] for r in run_rows]
            existing = set()
            for start in range(0, len(ids), 500):  # bounded IN lists
                existing |= set(conn.execute(select(runs.c.run_id).where(
                    runs.c.run_id.in_(ids[start:start + 500]))).scalars())
            fresh = [r for r in run_rows if r["run_id"] not in existing]
            _insert_ignore(conn, runs, fresh)
            fresh_ids = {r["run_id"] for r in fresh}
            _insert_ignore(conn, metrics, [m for m in metric_rows if m["run_id"] in fresh_ids])
        return len(fresh)

    # ------------------------------------------------------------------ reading

    def count_runs(self) -> int:
        with self._begin("cannot count runs") as conn:
            return len(conn.execute(select(runs.c.run_id)).all())

    def records(self) -> list[RunRecord]:
        """Every stored run as the typed record, in the order they started."""
        with self._begin("cannot read runs") as conn:
            texts = conn.execute(select(runs.c.record).order_by(runs.c.started_at, runs.c.run_id)).scalars().all()
        return [record_from_dict(json.loads(t), source=f"store {self.where}") for t in texts]

    def build_profiles(self, build_keys: Iterable[str]) -> dict[str, Mapping[str, Any] | None]:
        """Each build's profile (the ``build.profile`` its latest stored run recorded; None where it recorded none):
        a property of the build, so one record per key is read, not every night's."""
        out: dict[str, Mapping[str, Any] | None] = {}
        with self._begin("cannot read runs") as conn:
            for key in sorted(set(build_keys)):
                text = conn.execute(select(runs.c.record).where(runs.c.build_key == key)
                                    .order_by(runs.c.started_at.desc(), runs.c.run_id.desc()).limit(1)).scalar()
                profile = json.loads(text).get("build", {}).get("profile") if text else None
                out[key] = profile if isinstance(profile, dict) else None
        return out

    def searched(self, search_key: str, harness_version: str) -> list[RunRecord]:
        """The runs recorded under ``search_key`` by this harness version, in the order they were recorded."""
        query = (select(runs.c.record).where(runs.c.search_key == search_key,
                                             runs.c.harness_version == harness_version)
                 .order_by(runs.c.recorded_at, runs.c.started_at, runs.c.run_id))
        with self._begin("cannot read runs") as conn:
            texts = conn.execute(query).scalars().all()
        return [record_from_dict(json.loads(t), source=f"store {self.where}") for t in texts]

    def runs_frame(self) -> pd.DataFrame:
        """One row per run with its build, host and batch (no metrics)."""
        import pandas as pd

        with self._begin("cannot read runs") as conn:
            return pd.read_sql(runs_select(), conn)

    def stream(self, query: Select[Any], *, rows: int = 20_000) -> Iterator[Sequence[Row[Any]]]:
        """The rows of ``query`` in parts of at most ``rows``, read as they are consumed (a server-side
        cursor on PostgreSQL, SQLite's own stepping): what an export of any size holds at once."""
        with self._begin("cannot read the store") as conn:
            result = conn.execution_options(stream_results=True, yield_per=rows).execute(query)
            yield from result.partitions(rows)

    def stream_runs_with_metrics(self, query: Select[Any], *, runs_per_part: int = 2_000
                                 ) -> Iterator[tuple[list[tuple[Any, ...]], dict[str, list[tuple[str, float]]]]]:
        """The rows of ``query`` (runs, with a ``run_id`` column) as the driver's tuples, in parts, each with
        its runs' metrics by run id, read in the same transaction: a run's metrics are an index lookup (the
        metrics' key starts with the run id), where a sorted join of every metric value makes the database
        sort the widest rows (a year of nightly data is 730k of them). One connection, because every
        transaction of an SQLite store begins IMMEDIATE: a second one opened beside the stream would wait on it."""
        run_at = [c.name for c in query.selected_columns].index("run_id")
        with self._begin("cannot read the store") as conn:
            runs_cursor, lookup = _driver_cursor(conn, server_side=True), _driver_cursor(conn)
            try:
                with self._driver_errors():
                    _driver_execute(runs_cursor, conn, query)
                    while part := runs_cursor.fetchmany(runs_per_part):
                        by_run: dict[str, list[tuple[str, float]]] = {}
                        _driver_execute(lookup, conn, select(metrics.c.run_id, metrics.c.name, metrics.c.value)
                                        .where(metrics.c.run_id.in_([r[run_at] for r in part])))
                        for run_id, name, value in lookup.fetchall():  # one call, not one a row
                            by_run.setdefault(run_id, []).append((name, value))
                        yield list(part), by_run
            finally:
                lookup.close()
                runs_cursor.close()

    def columns(self, query: Select[Any]) -> dict[str, list[Any]]:
        """The rows of ``query`` as one list per column (by the column's name): read through the driver's
        own cursor, where a frame or SQLAlchemy's rows cost an object per row and field on top of the
        driver's (a year of nightly data is 73k runs)."""
        names = [c.name for c in query.selected_columns]
        cols: list[list[Any]] = [[] for _ in names]
        for part in self.tuples(query):  # each part into the columns as it comes: never every row at once
            for col, values in zip(cols, zip(*part)):
                col.extend(values)
        return dict(zip(names, cols))

    def tuples(self, query: Select[Any], *, rows: int = 50_000) -> Iterator[list[tuple[Any, ...]]]:
        """The rows of ``query`` as the driver's tuples, in parts of at most ``rows`` (730k metric values
        are read as they are consumed, not held as rows at once)."""
        with self._begin("cannot read the store") as conn:
            cursor = _driver_cursor(conn, server_side=True)
            try:
                with self._driver_errors():
                    _driver_execute(cursor, conn, query)
                    while part := cursor.fetchmany(rows):
                        yield list(part)
            finally:
                cursor.close()

    @contextmanager
    def _driver_errors(self) -> Iterator[None]:
        """The driver's own errors (from its cursor, which SQLAlchemy does not wrap) as the store's."""
        try:
            yield
        except self.engine.dialect.loaded_dbapi.Error as exc:
            raise InfraError(f"store {self.where}: cannot read the store: {_first_line(exc)}") from None

    def metrics_frame(self) -> pd.DataFrame:
        """Long format: run_id, name, value."""
        import pandas as pd

        with self._begin("cannot read metrics") as conn:
            return pd.read_sql(select(metrics.c.run_id, metrics.c.name, metrics.c.value), conn)

    # ------------------------------------------------------------------ detections (a cache)

    def detection_rows(self) -> dict[str, dict[str, Any]]:
        """Every cached detector state, by series key (``harness.series.detections``)."""
        with self._begin("cannot read detections") as conn:
            return {r.series_key: dict(r._mapping) for r in conn.execute(select(detections))}

    def put_detections(self, rows: Sequence[dict[str, Any]]) -> None:
        """Insert or replace cached detector states (the newest state of a series wins); a read-only store keeps
        none (the states are computed again next time)."""
        if not rows or self.read_only:
            return
        dialect = _dialect(self.dialect)
        stmt = dialect.insert(detections)
        stmt = stmt.on_conflict_do_update(
            index_elements=[detections.c.series_key],
            set_={c: stmt.excluded[c] for c in ("detector", "points", "inputs", "state", "updated_at")})
        with self._begin(f"cannot record {len(rows)} detection(s)") as conn:
            # One statement, the rows as the driver's executemany: a multi-row VALUES statement of 500
            # rows is compiled anew for each part (a second for a year's 1400 series).
            conn.execute(stmt, list(rows))

    # ------------------------------------------------------------------ alerts

    def alerts_frame(self) -> pd.DataFrame:
        import pandas as pd

        with self._begin("cannot read alerts") as conn:
            return pd.read_sql(select(alerts).order_by(alerts.c.created_at), conn)

    def alert_rows(self) -> list[dict[str, Any]]:
        with self._begin("cannot read alerts") as conn:
            return [dict(r._mapping) for r in conn.execute(select(alerts).order_by(alerts.c.created_at))]

    def add_alerts(self, rows: Sequence[dict[str, Any]]) -> list[str]:
        """Insert alerts not seen before (by fingerprint); the fingerprints that were new."""
        if not rows:
            return []
        with self._begin("cannot record alerts") as conn:
            fps = [r["fingerprint"] for r in rows]
            known = set(conn.execute(select(alerts.c.fingerprint).where(alerts.c.fingerprint.in_(fps))).scalars())
            fresh = [r for r in rows if r["fingerprint"] not in known]
            _insert_ignore(conn, alerts, fresh)
        return [r["fingerprint"] for r in fresh]

    def resolve_incidents(self, incidents: Sequence[str], resolution: str, night: str) -> int:
        """Resolve every open alert of ``incidents`` (incident fingerprints) at once, as ``resolution`` on
        ``night``: an incident has one state. The number of alerts changed (0: none was open)."""
        with self._begin("cannot update alerts") as conn:
            query = update(alerts).where(alerts.c.incident.in_(list(incidents))).where(alerts.c.state == "open")
            return int(conn.execute(query.values(state="resolved", resolution=resolution, closed_at=night,
                                                 updated_at=_now())).rowcount or 0)

    def resolve_alerts(self, fingerprints: Sequence[str], resolution: str, night: str) -> int:
        """Resolve the open alerts ``fingerprints`` as ``resolution`` on ``night``."""
        with self._begin("cannot update alerts") as conn:
            result = conn.execute(update(alerts).where(alerts.c.fingerprint.in_(list(fingerprints)))
                                  .where(alerts.c.state == "open")
                                  .values(state="resolved", resolution=resolution, closed_at=night, updated_at=_now()))
            return int(result.rowcount or 0)

    def rename_alert(self, fingerprint: str, kind: str, detail: str, names: str | None) -> None:
        """A level change named anew in place: its kind, detail and the history of its names."""
        with self._begin("cannot update alerts") as conn:
            conn.execute(update(alerts).where(alerts.c.fingerprint == fingerprint)
                         .values(kind=kind, detail=detail, names=names, updated_at=_now()))


def _driver_cursor(conn: Connection, *, server_side: bool = False) -> Any:
    """A DBAPI cursor of ``conn``'s own connection, inside its transaction. ``server_side``: on PostgreSQL a
    named cursor, whose rows the server sends as they are fetched (a plain one receives every row at once);
    SQLite steps its statement as the rows are fetched anyway."""
    raw = conn.connection.dbapi_connection
    if server_side and conn.dialect.name == "postgresql":
        return raw.cursor(name=f"harness_{secrets.token_hex(6)}")  # type: ignore[union-attr]
    return raw.cursor()  # type: ignore[union-attr]


def _driver_execute(cursor: Any, conn: Connection, query: Select[Any]) -> None:
    """Run ``query`` on a driver's cursor, its parameters bound in the driver's own style (sqlite3's
    positional ``?``, psycopg's named ``%(name)s``): the rows then cost the driver's tuple only, where
    SQLAlchemy's rows (or a frame) cost an object per row and field on top (730k metric values a year)."""
    compiled = query.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    params = compiled.params
    if conn.dialect.positional:
        cursor.execute(str(compiled), [params[name] for name in compiled.positiontup or ()])
    else:
        cursor.execute(str(compiled), params)


def runs_select() -> Select[Any]:
    """One row per run with its build, host and batch (no metrics): ``Store.runs_frame``, and the base
    an export joins the metrics to."""
    return (
        select(runs.c.run_id, runs.c.batch_id, batches.c.kind.label("batch_kind"),
               batches.c.label.label("batch_label"), batches.c.started_at.label("batch_started_at"),
               runs.c.scenario, runs.c.scenario_file, runs.c.case_name, runs.c.case_values, runs.c.role,
               runs.c.build_key, builds.c.kind.label("build_kind"), builds.c.spec.label("build_spec"),
               builds.c.version.label("build_version"), builds.c.commit.label("build_commit"),
               runs.c.hardware_key, hosts.c.gpu_name, hosts.c.gpu_count, hosts.c.driver_version,
               hosts.c.cuda_version, hosts.c.cpu, hosts.c.platform.label("host_platform"), hosts.c.hostname,
               runs.c.trial, runs.c.outcome, runs.c.signature, runs.c.phase, runs.c.reason, runs.c.started_at, runs.c.duration_s,
               runs.c.artifacts, runs.c.experiment, runs.c.harness_version, runs.c.kind.label("run_kind"),
               runs.c.set_overrides)
        .join(batches, batches.c.id == runs.c.batch_id)
        .join(builds, builds.c.key == runs.c.build_key)
        .join(hosts, hosts.c.key == runs.c.host_key)
    )


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _sqlite_engine(url: URL) -> Engine:
    engine = create_engine(url, connect_args={"timeout": _SQLITE_BUSY_MS / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event open the transaction, so it can be IMMEDIATE: the write lock
        # is taken up front, and a busy writer waits (busy_timeout) instead of failing mid-transaction.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={_SQLITE_BUSY_MS}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def check_sqlite_file(path: Path, where: str) -> None:
    """An SQLite store is a regular file (or absent): SQLite would open a device or a FIFO and write there."""
    import os
    import stat

    from harness.util.output_path import refuse_links

    refuse_links(path, f"store {where}:")  # dangling or not: the store is never created or opened through a link
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UserError(f"store {where}: cannot look at it ({exc.strerror or exc})") from None
    if not stat.S_ISREG(mode):
        from harness.util.bounded_read import kind_of_mode

        raise UserError(f"store {where}: {kind_of_mode(mode)}; an SQLite store is a regular file")
    _refuse_foreign_sqlite(path, where)


def _refuse_foreign_sqlite(path: Path, where: str) -> None:
    """Look, read-only, at an existing SQLite file before the store's engine opens it: that open already
    writes (WAL mode changes the file header), so another application's database must be refused first."""
    import sqlite3

    if path.stat().st_size == 0:
        return
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5)
        try:
            names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return  # busy (a writer creating it right now) or not readable: the engine's open says what it is
    except sqlite3.DatabaseError as exc:
        raise UserError(f"store {where}: not an SQLite database ({exc})") from None
    ours = {"builds", "hosts", "batches", "runs", "metrics", "alerts"}
    if names & ours and "store_version" not in names:
        raise UserError(f"store {where}: not a sglang-repro store (it has table(s) {', '.join(sorted(names & ours))} "
                        "but no store_version); refused, nothing changed")


_CONNECT_S = 5  # libpq's connect_timeout per attempt; a URL may ask for less, never more (a hung server is a verdict)


def _connect_timeout(url: URL) -> int:
    asked = url.query.get("connect_timeout")
    try:
        value = int(asked[-1] if isinstance(asked, tuple) else asked) if asked else _CONNECT_S
    except ValueError:
        raise UserError(f"store {redact_url(url)}: connect_timeout={asked!r}; give whole seconds") from None
    return max(2, min(value, _CONNECT_S))  # libpq takes 1 as 2; 0 would mean no deadline at all


def _unwritable(path: Path) -> bool:
    """An existing SQLite file that this process cannot write, or whose folder takes no new file (its ``-shm``): a
    read-only mount, an immutable folder. ``access`` answers for root too (EROFS, EPERM), where mode bits do not."""
    import os

    return path.is_file() and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK))


def _sqlite_read_only_engine(path: Path, where: str) -> Engine:
    """An engine that only reads ``path``: ``mode=ro``; where even that cannot open it (a WAL store wants its ``-shm``,
    which a read-only folder cannot take) ``immutable=1``, which reads the file alone, and says so."""
    import sqlite3
    import sys

    uri = path.resolve().as_uri()

    def connect(how: str) -> sqlite3.Connection:
        conn = sqlite3.connect(f"{uri}?{how}", uri=True, timeout=_SQLITE_BUSY_MS / 1000, check_same_thread=False)
        conn.isolation_level = None  # SQLAlchemy's "begin" below opens the (deferred: reading) transaction
        conn.execute("PRAGMA query_only=ON")
        return conn

    how = "mode=ro"
    try:
        probe = connect(how)
        try:
            probe.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            probe.close()  # an open file would keep its mount busy
    except sqlite3.OperationalError:
        how = "immutable=1"
        sys.stderr.write(f"sglang-repro: store {where}: read-only, and its folder cannot take the -shm file SQLite's "
                         "WAL wants: read as an unchanging file (what a writer left in its -wal, if any, is not seen)\n")
    engine = create_engine("sqlite://", creator=lambda: connect(how), poolclass=NullPool)

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN")

    return engine


def _open_read_only(url: URL, where: str) -> Store:
    """The store at ``url`` (an SQLite file that cannot be written), read as it is: not created, not upgraded."""
    engine = _sqlite_read_only_engine(Path(url.database or ""), where)
    try:
        with engine.connect() as conn:
            version = current_version(conn)
    except SQLAlchemyError as exc:
        raise InfraError(f"store {where}: cannot open read-only: {_first_line(exc)}") from None
    if version != latest_version():
        engine.dispose()
        raise InfraError(f"store {where}: read-only and at version {version}; this harness reads version "
                         f"{latest_version()}: " + ("upgrade sglang-repro" if version > latest_version() else
                                                    "open it once where it can be written (it upgrades itself)"))
    return Store(engine, url, read_only=True)


def open_store(value: str | URL, *, migrate_to_latest: bool = True, read_only: bool = False) -> Store:
    """Open (and create or upgrade) the store at a path or URL; InfraError naming it when it cannot be reached.

    ``read_only`` (commands that only read: dashboard, store alerts and export): an SQLite file that cannot be written
    (a read-only mount) is opened for reading only, never created or upgraded; any other store opens as usual."""
    url = value if isinstance(value, URL) else store_url(value)
    where = redact_url(url)
    if url.drivername == "sqlite":  # a device, a FIFO or another application's database: refused before opening
        check_sqlite_file(Path(url.database or ""), where)
        if read_only and _unwritable(Path(url.database or "")):
            return _open_read_only(url, where)
    try:
        if url.drivername == "sqlite":
            Path(url.database or "").parent.mkdir(parents=True, exist_ok=True)
            engine = _sqlite_engine(url)
        else:
            check_libpq_files(url)  # a FIFO as passfile or service file blocks libpq before any timeout starts
            engine = create_engine(url, connect_args={"connect_timeout": _connect_timeout(url)}, pool_pre_ping=True)
        if migrate_to_latest:
            migrate(engine, where=where)
    except SQLAlchemyError as exc:
        raise InfraError(f"store {where}: cannot open: {_first_line(exc)}") from None
    except OSError as exc:
        raise InfraError(f"store {where}: cannot open: {exc}") from None
    return Store(engine, url)
