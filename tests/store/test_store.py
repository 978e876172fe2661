"""The results store on SQLite and on a real PostgreSQL: records, idempotence, migrations, errors, concurrency."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import MetaData, create_engine, inspect

from harness.records.outcome import Outcome
from harness.records.run_record import RunRecord
from harness.series.points import stored_case_points
from harness.store import migrations
from harness.store.schema import RUN_KINDS, metadata
from harness.store.store import Batch, _insert_ignore, _rows, new_batch, open_store
from harness.store.transfer import export_store, import_folders
from harness.store.url import redact_url
from harness.store.url import store_url as parse_store_url
from harness.store.writer import record_run
from harness.util.errors import InfraError
from tests.helpers import make_record
from tests.store.records import write_run_folder


def test_record_round_trips_and_is_idempotent(store_url: str) -> None:
    record = make_record(run_id="r1", metrics={"accept_length": 1.75, "output_throughput_tok_s": 190.5, "ttft_ms_p50": None})
    batch = new_batch("run")
    with open_store(store_url) as store:
        assert store.record(record, batch) is True
        assert store.record(record, batch) is False  # same run id: nothing new
        assert store.record(record, new_batch("run")) is False
        assert store.count_runs() == 1
        (back,) = store.records()
        assert back == record
        m = store.metrics_frame()
        pairs = sorted(zip(m["name"], m["value"], strict=True))
        assert pairs == [("accept_length", 1.75), ("output_throughput_tok_s", 190.5)]
        runs = store.runs_frame()
        assert runs.loc[0, "hardware_key"] == "cpu:test-cpu" and runs.loc[0, "build_spec"] == "sim:post-fix"


def test_metrics_are_long_format_with_every_trial(store_url: str) -> None:
    batch = new_batch("nightly", "n1")
    recs = [make_record(run_id=f"t{i}", trial=i, metrics={"accept_length": 1.5 + i / 10}) for i in range(5)]
    with open_store(store_url) as store:
        assert store.record_many(recs, batch) == 5
        values = sorted(store.metrics_frame()["value"])
    assert values == pytest.approx([1.5, 1.6, 1.7, 1.8, 1.9])


def test_migrations_upgrade_an_old_store_and_keep_its_runs(store_url: str) -> None:
    engine = create_engine(parse_store_url(store_url))
    assert migrations.migrate(engine, target=1) == 1
    with engine.connect() as conn:
        assert migrations.current_version(conn) == 1
        assert not inspect(conn).has_table("alerts")
    engine.dispose()
    # A v1 store already holds runs; opening it with this harness upgrades it and keeps them.
    _record_as_version(store_url, [(make_record(run_id="old"), new_batch("run"))])
    with open_store(store_url) as store:
        assert store.count_runs() == 1
        with store.engine.connect() as conn:
            assert migrations.current_version(conn) == migrations.latest_version()
            live = inspect(conn)
            for table in metadata.sorted_tables:
                assert {c["name"] for c in live.get_columns(table.name)} == set(table.columns.keys()), table.name
        assert migrations.migrate(store.engine) == migrations.latest_version()  # twice is a no-op


def _record_as_version(url: str, runs: list[tuple[RunRecord, Batch]]) -> None:
    """Rows as an older harness wrote them into the store at ``url``: this harness's rows, cut to the columns
    the store's tables have at its version (what a store of that version holds)."""
    engine = create_engine(parse_store_url(url))
    with engine.begin() as conn:
        live = MetaData()
        live.reflect(conn)
        for record, batch in runs:
            build_row, host_row, run_row = _rows(record, batch, "2026-11-01T00:00:00+00:00", None, "run")
            rows = [("batches", {"id": batch.id, "kind": batch.kind, "label": batch.label,
                                 "started_at": batch.started_at}),
                    ("builds", build_row), ("hosts", host_row), ("runs", run_row)]
            rows += [("metrics", {"run_id": record.run_id, "name": k, "value": v}) for k, v in record.metrics.items()
                     if isinstance(v, float)]
            for name, row in rows:
                table = live.tables[name]
                _insert_ignore(conn, table, [{k: v for k, v in row.items() if k in table.c}])
    engine.dispose()


def test_migration_7_keeps_one_off_runs_out_of_the_series(store_url: str) -> None:
    """A v6 store's runs get the kind of their batch (an import's: nightly): the nightlies and the imported
    runs stay a series; the one-off run, the compare and the pytest session leave it, and stay in the store."""
    engine = create_engine(parse_store_url(store_url))
    assert migrations.migrate(engine, target=6) == 6
    engine.dispose()
    kinds = ("nightly", "import", "run", "compare", "pytest", "nightly")
    runs = [(make_record(run_id=f"r{i}-{kind}", spec="sim:post-fix", started_at=f"2026-11-0{i + 1}T02:00:00+00:00",
                         metrics={"output_throughput_tok_s": 200.0 + i}),
             new_batch(kind, f"n{i}", started_at=f"2026-11-0{i + 1}T02:00:00+00:00")) for i, kind in enumerate(kinds)]
    _record_as_version(store_url, runs)
    with open_store(store_url) as store:
        frame = store.runs_frame().sort_values("run_id")
        assert dict(zip(frame["run_id"], frame["run_kind"])) == {
            "r0-nightly": "nightly", "r1-import": "nightly", "r2-run": "run", "r3-compare": "compare",
            "r4-pytest": "pytest", "r5-nightly": "nightly"}
        (cp,) = stored_case_points(store)
        assert [p.batch_label for p in cp.points] == ["n0", "n1", "n5"]
        (every,) = stored_case_points(store, kinds=RUN_KINDS)  # asked: every kind, in the order of the nights
        assert [p.batch_label for p in every.points] == [f"n{i}" for i in range(6)]
        with store.engine.connect() as conn:
            assert "ix_runs_kind" in {i["name"] for i in inspect(conn).get_indexes("runs")}
        # Written now: each run with the kind of what made it.
        store.record(make_record(run_id="later"), new_batch("run"))
        store.record_many([make_record(run_id="imported")], new_batch("import"), kind="compare")
        frame = store.runs_frame().set_index("run_id")
        assert frame.loc["later", "run_kind"] == "run" and frame.loc["imported", "run_kind"] == "compare"


def test_migration_4_makes_each_older_alert_an_incident_of_its_own(store_url: str) -> None:
    from sqlalchemy import text

    engine = create_engine(parse_store_url(store_url))
    assert migrations.migrate(engine, target=3) == 3
    with engine.begin() as conn:  # an alert as a v3 store holds it: no incident column
        conn.execute(text(
            "INSERT INTO alerts (fingerprint, kind, scenario, case_name, hardware_key, first_bad, detail, bisect, "
            "state, batch_id, created_at, updated_at) VALUES ('fp-old', 'step', 'sc', 'c', 'cpu:x', 'b (n2)', "
            "'d', 'sglang-repro compare', 'acknowledged', 'b1', '2026-11-01', '2026-11-01')"))
    engine.dispose()
    with open_store(store_url) as store:
        (row,) = store.alert_rows()
        # Migration 6: an acknowledged alert was one a person accepted.
        assert row["incident"] == "fp-old" and (row["state"], row["resolution"]) == ("resolved", "accepted")
        with store.engine.connect() as conn:
            assert "ix_alerts_incident" in {i["name"] for i in inspect(conn).get_indexes("alerts")}


def test_migration_6_opens_new_alerts_and_keeps_a_level_changes_names(store_url: str) -> None:
    """A v5 store's states (new / acknowledged / resolved) become open / resolved: accepted / resolved; an
    open incident resolves once (a second resolve changes nothing), and a rename keeps the names."""
    from sqlalchemy import text

    engine = create_engine(parse_store_url(store_url))
    assert migrations.migrate(engine, target=5) == 5
    with engine.begin() as conn:
        for fp, state in (("fp-new", "new"), ("fp-ack", "acknowledged"), ("fp-res", "resolved")):
            conn.execute(text(
                "INSERT INTO alerts (fingerprint, kind, scenario, case_name, hardware_key, first_bad, detail, bisect, "
                "state, batch_id, created_at, updated_at, incident) VALUES (:fp, 'step', 'sc', 'c', 'cpu:x', "
                "'b (n2)', 'd', 'sglang-repro compare', :state, 'b1', '2026-11-01', '2026-11-01', :fp)"),
                {"fp": fp, "state": state})
    engine.dispose()
    with open_store(store_url) as store:
        got = {r["fingerprint"]: (r["state"], r["resolution"]) for r in store.alert_rows()}
        assert got == {"fp-new": ("open", None), "fp-ack": ("resolved", "accepted"), "fp-res": ("resolved", None)}
        assert store.resolve_incidents(["fp-new"], "accepted", "ack 2026-11-03") == 1
        assert store.resolve_incidents(["fp-new"], "by hand", "later") == 0  # resolved once
        store.rename_alert("fp-ack", "drift", "d2", '[{"night": "n2", "name": "level-change", "evidence": "e"}]')
        rows = {r["fingerprint"]: r for r in store.alert_rows()}
        assert (rows["fp-new"]["resolution"], rows["fp-new"]["closed_at"]) == ("accepted", "ack 2026-11-03")
        assert rows["fp-ack"]["kind"] == "drift" and "level-change" in rows["fp-ack"]["names"]


def test_a_store_newer_than_the_harness_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "r.db")
    with open_store(path) as store, store.engine.begin() as conn:
        from harness.store.schema import store_version
        conn.execute(store_version.insert().values(version=99, description="future", applied_at="2030"))
    with pytest.raises(InfraError, match="version 99 is newer"):
        open_store(path)


def test_unreachable_store_is_infra_naming_the_url_without_the_password() -> None:
    url = "postgresql+psycopg://ci:s3cr3t-pw@127.0.0.1:1/results"
    with pytest.raises(InfraError) as info:
        record_run(url, make_record(run_id="x"))
    text = str(info.value)
    assert "s3cr3t-pw" not in text and "ci:***@127.0.0.1:1/results" in text
    assert redact_url(url) == "postgresql+psycopg://ci:***@127.0.0.1:1/results"


def _writer(url: str, proc: int, count: int) -> None:
    from harness.store.store import new_batch as nb
    from harness.store.writer import StoreWriter

    with StoreWriter(url, nb("pytest", f"proc-{proc}")) as writer:
        for i in range(count):
            writer.record(make_record(run_id=f"p{proc}-{i}", trial=i, metrics={"accept_length": 1.0 + i}))


@pytest.mark.parametrize(("procs", "count"), [(4, 25)])
def test_concurrent_writers_lose_nothing(store_url: str, procs: int, count: int) -> None:
    """The issue's figure is 8 processes x 200 results (benchmarks/bench_store.py); here a smaller one."""
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_writer, args=(store_url, p, count)) for p in range(procs)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    assert [w.exitcode for w in workers] == [0] * procs
    with open_store(store_url) as store:
        assert store.count_runs() == procs * count
        assert len(store.metrics_frame()) == procs * count


def test_import_then_export_parquet_csv_hud(store_url: str, tmp_path: Path) -> None:
    reports = tmp_path / "reports" / "runs"
    for i in range(3):
        write_run_folder(reports, make_record(run_id=f"imp-{i}", trial=i, metrics={"accept_length": 1.6 + i / 100,
                                                                            "output_throughput_tok_s": 100.0 + i},
                                              artifacts=str(reports / f"imp-{i}")))
    write_run_folder(reports, make_record(run_id="imp-crash", trial=3, outcome=Outcome.CRASH,
                                          signature="frozen-kv-mtp-stale-out-cache-loc", metrics={}))
    (reports / "broken").mkdir()
    (reports / "broken" / "result.json").write_text("{not json")
    with open_store(store_url) as store:
        report = import_folders(store, [tmp_path / "reports"])
        assert (report.found, report.recorded, len(report.skipped)) == (5, 4, 1)
        assert "broken/result.json" in report.skipped[0]
        assert import_folders(store, [tmp_path / "reports"]).recorded == 0  # idempotent

        assert export_store(store, "parquet", tmp_path / "out.parquet") == 7  # 3 runs x 2 metrics + the crash
        frame = pd.read_parquet(tmp_path / "out.parquet")
        assert set(frame["run_id"]) == {"imp-0", "imp-1", "imp-2", "imp-crash"}
        assert sorted(frame.loc[frame["metric"] == "accept_length", "value"]) == pytest.approx([1.6, 1.61, 1.62])

        export_store(store, "csv", tmp_path / "out.csv")
        assert len(pd.read_csv(tmp_path / "out.csv")) == 7

        n = export_store(store, "hud", tmp_path / "hud.json")
        hud = json.loads((tmp_path / "hud.json").read_text())
    assert n == len(hud) == 2  # one record per metric; the trials are its benchmark_values
    by_metric = {r["metric"]["name"]: r for r in hud}
    acc = by_metric["accept_length"]
    assert acc["metric"]["benchmark_values"] == pytest.approx([1.6, 1.61, 1.62])
    assert {k: acc["metric"]["extra_info"][k] for k in ("unit", "better")} == {"unit": "tokens/step", "better": "higher"}
    assert acc["schema_version"] == "v3" and acc["benchmark"]["name"] == "store-test-scenario"
    assert set(acc) >= {"timestamp", "repo", "head_branch", "head_sha", "workflow_id", "run_attempt", "job_id",
                        "runners", "benchmark", "model", "inputs", "dependencies", "metric"}
    assert set(acc["runners"][0]) == {"name", "type", "cpu_info", "cpu_count", "mem_info", "avail_mem_in_gb",
                                      "gpu_info", "gpu_count", "gpu_mem_info", "avail_gpu_mem_in_gb", "extra_info"}


def test_sqlite_store_is_in_wal_mode(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "w.db")) as store, store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 60000
