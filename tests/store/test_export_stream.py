"""Streaming exports on SQLite and PostgreSQL: written in parts, the same rows and order as the whole
store sorted in Python, and the same bytes on both databases."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from harness.records.outcome import Outcome
from harness.records.run_record import RunRecord
from harness.store import transfer
from harness.store.store import build_key, new_batch, open_store
from harness.store.transfer import export_store
from tests.helpers import make_record

# A claim about the harness, not the model: its reference servers are the torch-free stand-in (tests/conftest.py).
pytestmark = pytest.mark.standin

# Mixed case and punctuation: PostgreSQL's default collation would sort these apart from Python's order.
SCENARIOS = ("beta", "Alpha", "alpha-2", "_under")


def _fill(url: str) -> list[tuple[str, str, RunRecord]]:
    """Three nights x four scenarios x two cases, 1-3 trials, a crash without metrics, commits on some."""
    out = []
    with open_store(url) as store:
        for night in range(3):
            batch = new_batch("nightly", f"n{night}", started_at=f"2026-03-0{night + 1}T01:00:00+00:00")
            recs = []
            for s, scenario in enumerate(SCENARIOS):
                for case in ("tokens=9", "tokens=10"):
                    for trial in reversed(range(1 + (s + night) % 3)):  # recorded out of trial order
                        crash = s == 1 and trial == 0 and night == 2
                        rec = make_record(
                            run_id=f"{night}-{scenario}-{case}-{trial}", scenario=scenario, case=case, trial=trial,
                            started_at=batch.started_at, outcome=Outcome.CRASH if crash else Outcome.PASS,
                            signature="sig" if crash else None, commit=None if s % 2 else f"{night:040x}",
                            metrics={} if crash else {"accept_length": 1.5 + trial / 10 + s,
                                                      "output_throughput_tok_s": 100.0 * (night + 1) + trial})
                        recs.append(rec)
                        out.append((batch.id, batch.started_at, rec))
            store.record_many(recs, batch)
    return out


def test_exports_stream_in_parts_with_the_rows_and_order_of_the_whole(store_url: str, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    runs = _fill(store_url)
    monkeypatch.setattr(transfer, "EXPORT_ROWS", 5)  # many parts, boundaries inside a HUD record's trials
    with open_store(store_url) as store:
        n_hud = export_store(store, "hud", tmp_path / "hud.json")
        n_pq = export_store(store, "parquet", tmp_path / "out.parquet")
        n_csv = export_store(store, "csv", tmp_path / "out.csv")

    # HUD: one record per (batch, scenario, case, build, hardware, metric) in that order, trials in order.
    groups: dict[tuple[str, ...], list[tuple[int, float]]] = {}
    for batch_id, _, rec in runs:
        for metric, value in rec.metrics.items():
            key = (batch_id, rec.scenario.name, rec.case.name, build_key(rec), rec.host.hardware_key, metric)
            assert value is not None
            groups.setdefault(key, []).append((rec.trial, float(value)))
    text = (tmp_path / "hud.json").read_text()
    hud = json.loads(text)
    assert text == "[\n" + ",\n".join(json.dumps(r) for r in hud) + "\n]\n"  # one record a line
    assert n_hud == len(hud) == len(groups)
    assert [(r["benchmark"]["name"], r["benchmark"]["extra_info"]["case"], r["metric"]["name"]) for r in hud] == \
        [(k[1], k[2], k[5]) for k in sorted(groups)]
    assert [r["metric"]["benchmark_values"] for r in hud] == [[v for _, v in sorted(groups[k])] for k in sorted(groups)]
    assert {r["head_sha"] for r in hud} == {"", *(f"{n:040x}" for n in range(3))}  # a missing commit is "", not NaN

    # Parquet and CSV: one row per (run, metric), a crash keeps one row without a metric, sorted as the frame was.
    expected = sorted(((started, rec.scenario.name, rec.case.name, rec.trial, metric, rec.run_id)
                       for _, started, rec in runs for metric in (sorted(rec.metrics) or [""])),
                      key=lambda r: (*r[:4], r[4] == "", r[4], r[5]))  # no metric: last
    for frame, n in ((pd.read_parquet(tmp_path / "out.parquet"), n_pq), (pd.read_csv(tmp_path / "out.csv"), n_csv)):
        assert n == len(frame) == len(expected)
        got = [(r.batch_started_at, r.scenario, r.case_name, int(r.trial), "" if pd.isna(r.metric) else r.metric,
                r.run_id) for r in frame.itertuples()]
        assert got == expected


def test_both_databases_write_the_same_bytes(tmp_path: Path, pg_url: str) -> None:
    paths = []
    for name, url in (("sqlite", str(tmp_path / "s.db")), ("postgresql", pg_url)):
        _fill(url)
        with open_store(url) as store:
            paths.append(tmp_path / f"{name}.json")
            export_store(store, "hud", paths[-1])
    a, b = (p.read_text() for p in paths)
    assert a == b and len(json.loads(a)) > 0


def _extra(url: str) -> None:
    """What the nightly grid lacks: a trial without one metric (a record's first row is then a later trial's),
    two builds in one batch (rows of one (night, case, trial) interleave by metric), a run that has metrics
    only under a name sorted before the others."""
    with open_store(url) as store:
        batch = new_batch("nightly", "n9", started_at="2026-03-09T01:00:00+00:00")
        recs = [make_record(run_id="x-b-0", scenario="beta", case="tokens=9", trial=0, spec="sim:pre-fix", commit="f" * 40,
                            started_at=batch.started_at, metrics={"output_throughput_tok_s": 5.0}),
                make_record(run_id="x-b-1", scenario="beta", case="tokens=9", trial=1, spec="sim:pre-fix", commit="f" * 40,
                            started_at=batch.started_at, metrics={"accept_length": 2.25, "output_throughput_tok_s": 0.1}),
                make_record(run_id="x-a-0", scenario="beta", case="tokens=9", trial=0, started_at=batch.started_at,
                            metrics={"accept_length": 1e-300, "ttft_ms_p50": 12.5}),
                make_record(run_id="x-a-1", scenario="beta", case="tokens=9", trial=1, started_at=batch.started_at,
                            metrics={})]
        store.record_many(recs, batch)


def test_streamed_exports_equal_the_whole_store_sorted_in_memory(store_url: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The streamed writers (runs in parts, their metrics by run id) against the whole store read at once
    (``export_frame``: the database's sorted join) and ``hud_records`` over it: the same bytes for HUD and
    the same rows, values and order for Parquet, with parts as small as one run."""
    _fill(store_url)
    _extra(store_url)
    with open_store(store_url) as store:
        frame = transfer.export_frame(store)
        whole = transfer.hud_records(frame)
        for rows in (5, 30, 20_000):
            monkeypatch.setattr(transfer, "EXPORT_ROWS", rows)
            export_store(store, "hud", tmp_path / "hud.json")
            export_store(store, "parquet", tmp_path / "out.parquet")
            assert (tmp_path / "hud.json").read_text() == "[\n" + ",\n".join(json.dumps(r) for r in whole) + "\n]\n"
            got = pd.read_parquet(tmp_path / "out.parquet")
            assert list(got.columns) == list(frame.columns)

            def cells(f: pd.DataFrame) -> list[tuple[object, ...]]:
                return [tuple(None if pd.isna(v) else v for v in row) for row in f.itertuples(index=False)]
            assert cells(got) == cells(frame)
    assert [r["metric"]["benchmark_values"] for r in whole if r["head_sha"] == "f" * 40] == [[2.25], [5.0, 0.1]]
