"""Versioned migrations of the store: a numbered list, applied in order, each once, under a lock.

Each migration is a function of a connection inside the transaction that records it in
``store_version``; its tables are written out here as they were at that version (never imported
from ``schema.py``, which moves on), so an old store upgrades the way it was built. Writers from
several processes may open a fresh store at once: SQLite serialises them with ``BEGIN IMMEDIATE``,
PostgreSQL with a transaction-scoped advisory lock, and the version is read again under the lock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import (
    Column,
    Connection,
    Engine,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    inspect,
    select,
    text,
)

from harness.store.schema import store_version
from harness.util.clock import now_iso
from harness.util.errors import InfraError, UserError

__all__ = ["MIGRATIONS", "Migration", "current_version", "latest_version", "migrate"]

# Any fixed number: it names the lock that serialises migrations on one PostgreSQL database.
_PG_LOCK_ID = 72_928_264


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    apply: Callable[[Connection], None]


def _v1_runs(conn: Connection) -> None:
    md = MetaData()
    Table("builds", md, Column("key", String(32), primary_key=True), Column("kind", String(32), nullable=False),
          Column("spec", Text, nullable=False), Column("version", Text), Column("commit", String(64)))
    Table("hosts", md, Column("key", String(32), primary_key=True), Column("hardware_key", Text, nullable=False),
          Column("hostname", Text), Column("gpu_name", Text), Column("gpu_count", Integer, nullable=False),
          Column("driver_version", Text), Column("cuda_version", Text), Column("compute_capability", Text),
          Column("cpu", Text), Column("platform", Text))
    Table("batches", md, Column("id", String(64), primary_key=True), Column("kind", String(16), nullable=False),
          Column("label", Text, nullable=False), Column("started_at", String(40), nullable=False))
    Table("runs", md,
          Column("run_id", String(200), primary_key=True),
          Column("batch_id", String(64), ForeignKey("batches.id"), nullable=False),
          Column("scenario", Text, nullable=False), Column("scenario_file", Text, nullable=False),
          Column("case_name", Text, nullable=False), Column("case_values", Text, nullable=False),
          Column("role", Text),
          Column("build_key", String(32), ForeignKey("builds.key"), nullable=False),
          Column("host_key", String(32), ForeignKey("hosts.key"), nullable=False),
          Column("hardware_key", Text, nullable=False), Column("trial", Integer, nullable=False),
          Column("outcome", String(16), nullable=False), Column("signature", Text), Column("phase", String(16)),
          Column("reason", Text, nullable=False), Column("started_at", String(40), nullable=False),
          Column("duration_s", Float, nullable=False), Column("recorded_at", String(40), nullable=False),
          Column("artifacts", Text, nullable=False), Column("experiment", String(64), nullable=False),
          Column("harness_version", Text, nullable=False), Column("record", Text, nullable=False),
          Index("ix_runs_series", "scenario", "case_name"), Index("ix_runs_batch", "batch_id"))
    Table("metrics", md, Column("run_id", String(200), ForeignKey("runs.run_id"), primary_key=True),
          Column("name", String(64), primary_key=True), Column("value", Float, nullable=False))
    md.create_all(conn)


def _v2_alerts(conn: Connection) -> None:
    md = MetaData()
    Table("alerts", md,
          Column("fingerprint", String(32), primary_key=True), Column("kind", String(16), nullable=False),
          Column("scenario", Text, nullable=False), Column("case_name", Text, nullable=False),
          Column("metric", Text), Column("hardware_key", Text, nullable=False), Column("signature", Text),
          Column("last_good", Text), Column("first_bad", Text, nullable=False), Column("effect", Float),
          Column("detail", Text, nullable=False), Column("bisect", Text, nullable=False),
          Column("state", String(16), nullable=False), Column("batch_id", String(64), nullable=False),
          Column("created_at", String(40), nullable=False), Column("updated_at", String(40), nullable=False))
    md.create_all(conn)


def _v3_search_key(conn: Connection) -> None:
    conn.execute(text("ALTER TABLE runs ADD COLUMN search_key VARCHAR(64)"))
    conn.execute(text("CREATE INDEX ix_runs_search ON runs (search_key)"))


def _v4_incidents(conn: Connection) -> None:
    # An alert recorded before incidents existed is an incident of its own.
    conn.execute(text("ALTER TABLE alerts ADD COLUMN incident VARCHAR(32)"))
    conn.execute(text("UPDATE alerts SET incident = fingerprint"))
    conn.execute(text("CREATE INDEX ix_alerts_incident ON alerts (incident)"))


def _v5_detections(conn: Connection) -> None:
    md = MetaData()
    Table("detections", md,
          Column("series_key", String(64), primary_key=True), Column("detector", String(64), nullable=False),
          Column("points", Integer, nullable=False), Column("inputs", String(64), nullable=False),
          Column("state", Text, nullable=False), Column("updated_at", String(40), nullable=False))
    md.create_all(conn)


def _v6_lifecycle(conn: Connection) -> None:
    # States were new / acknowledged / resolved; an acknowledged alert was one a person accepted.
    for column in ("names TEXT", "resolution VARCHAR(16)", "closed_at TEXT"):
        conn.execute(text(f"ALTER TABLE alerts ADD COLUMN {column}"))
    conn.execute(text("UPDATE alerts SET state = 'open' WHERE state = 'new'"))
    conn.execute(text("UPDATE alerts SET state = 'resolved', resolution = 'accepted' WHERE state = 'acknowledged'"))


def _v7_run_kind(conn: Connection) -> None:
    # What made each run, from its batch; an import stood for a nightly (a nightly's run folders brought in),
    # so its runs stay in the series. A one-off run, a compare and a pytest session no longer do.
    conn.execute(text("ALTER TABLE runs ADD COLUMN kind VARCHAR(16)"))
    conn.execute(text("UPDATE runs SET kind = (SELECT batches.kind FROM batches WHERE batches.id = runs.batch_id)"))
    conn.execute(text("UPDATE runs SET kind = 'nightly' WHERE kind = 'import'"))
    conn.execute(text("CREATE INDEX ix_runs_kind ON runs (kind)"))


def _v8_upstream_links(conn: Connection) -> None:
    md = MetaData()
    Table("upstream_links", md,
          Column("incident", String(32), primary_key=True), Column("url", Text, primary_key=True),
          Column("linked_at", String(40), nullable=False))
    md.create_all(conn)


def _v9_set_overrides(conn: Connection) -> None:
    # Earlier runs recorded no overrides: NULL, as a run without any
    conn.execute(text("ALTER TABLE runs ADD COLUMN set_overrides TEXT"))


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "builds, hosts, batches, runs, metrics (long format)", _v1_runs),
    Migration(2, "alerts with fingerprints and states", _v2_alerts),
    Migration(3, "runs.search_key: what a bisect or minimize asked a run to answer", _v3_search_key),
    Migration(4, "alerts.incident: the alerts of one change share one fingerprint and one state", _v4_incidents),
    Migration(5, "detections: each series' detector state, so a review recomputes only the nights since", _v5_detections),
    Migration(6, "alerts: open / resolved (how, when) / transient, and a level change's names over its nights",
              _v6_lifecycle),
    Migration(7, "runs.kind: what made each run (nightly, run, compare, pytest, bisect, minimize); series hold nightly "
                 "runs", _v7_run_kind),
    Migration(8, "upstream_links: the upstream issues filed for an incident (store link)", _v8_upstream_links),
    Migration(9, "runs.set_overrides: the --set overrides a run ran with, so an incident's next step gives them again",
              _v9_set_overrides),
)


def latest_version() -> int:
    return MIGRATIONS[-1].version


def _refuse_foreign(conn: Connection, where: str) -> None:
    """A database without ``store_version`` that already has a table of one of the store's names is another
    application's: creating or altering tables in it would damage that application. Refused, untouched."""
    names = {"builds", "hosts", "batches", "runs", "metrics", "alerts"}
    found = sorted(names & set(inspect(conn).get_table_names()))
    if found:
        raise UserError(f"store {where}: not a sglang-repro store (it has table(s) {', '.join(found)} but no "
                        "store_version); refused, nothing changed")


def current_version(conn: Connection) -> int:
    """The store's version: 0 for an empty database."""
    if not inspect(conn).has_table("store_version"):
        return 0
    return int(conn.execute(select(store_version.c.version).order_by(store_version.c.version.desc())
                            .limit(1)).scalar() or 0)


def migrate(engine: Engine, *, target: int | None = None, where: str = "") -> int:
    """Bring the store up to ``target`` (default: the newest); returns the version it is at."""
    goal = latest_version() if target is None else target
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": _PG_LOCK_ID})
        version = current_version(conn)
        if version == 0:
            _refuse_foreign(conn, where)
        if version > latest_version():
            raise InfraError(f"store {where}: version {version} is newer than this harness knows "
                             f"({latest_version()}); upgrade sglang-repro")
        if version >= goal:
            return version
        store_version.create(conn, checkfirst=True)
        for migration in MIGRATIONS:
            if version < migration.version <= goal:
                migration.apply(conn)
                conn.execute(store_version.insert().values(
                    version=migration.version, description=migration.description,
                    applied_at=now_iso()))
                version = migration.version
        return version
