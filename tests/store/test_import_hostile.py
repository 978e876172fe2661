"""Issue 24, items 3 and 8: one bad file never sinks an import, the schema's limits are the same on SQLite
and PostgreSQL, a foreign database is refused untouched, and the dashboard escapes names for plotly and
gives every scenario its own page. Each runs on both backends (tests/store/conftest.py)."""

from __future__ import annotations

import json
import math
import os
import sqlite3
from pathlib import Path

import pytest

from harness.cli import main
from harness.records.run_record import record_to_dict
from harness.store.store import open_store
from tests.helpers import make_record


def _write(folder: Path, name: str, data: dict[str, object] | str) -> Path:
    path = folder / name / "result.json"
    path.parent.mkdir(parents=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data, allow_nan=True))
    return path


def _record(run_id: str, **metrics: float) -> dict[str, object]:
    data = record_to_dict(make_record("pass", metrics=metrics or {"accept_length": 2.5}))
    data["run_id"] = run_id
    return data


def test_bad_files_and_values_are_skipped_by_name_and_the_rest_imported(tmp_path: Path, store_url: str,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    tree = tmp_path / "tree"
    _write(tree, "good", _record("good-1"))
    broken = _write(tree, "broken", "{not json")
    nan = _write(tree, "nan", _record("nan-1", accept_length=math.nan, output_throughput_tok_s=10.0))
    long_id = _write(tree, "long", _record("r" * 201))  # over runs.run_id VARCHAR(200): PostgreSQL refused it
    nul = _write(tree, "nul", {**_record("nul-1"), "reason": "a\x00b"})  # PostgreSQL text holds no NUL
    huge = _write(tree, "huge", {**_record("huge-1"), "trial": 2**40})  # over PostgreSQL's INTEGER
    (tree / "fifo").mkdir()
    os.mkfifo(tree / "fifo" / "result.json")
    (tree / "zero").mkdir()
    (tree / "zero" / "result.json").symlink_to("/dev/zero")
    code = main(["store", "import", str(tree), "--store", store_url])
    out = capsys.readouterr().out
    assert code == 1, out  # some were skipped
    skipped = {line.split(": ", 2)[1]: line for line in out.splitlines() if line.startswith("skipped: ")}
    for path in (broken, long_id, nul, huge, nan, tree / "fifo" / "result.json", tree / "zero" / "result.json"):
        assert str(path) in skipped, (path, out)
    assert "runs.run_id is 201 characters" in skipped[str(long_id)]
    assert "NUL" in skipped[str(nul)] and "32-bit" in skipped[str(huge)]
    assert "FIFO" in skipped[str(tree / "fifo" / "result.json")]
    assert "character device" in skipped[str(tree / "zero" / "result.json")]
    assert "accept_length" in skipped[str(nan)] and "imported without them" in skipped[str(nan)]
    assert "imported 2 new run(s) of 8 found" in out
    with open_store(store_url) as store:
        by_id = {r.run_id: r for r in store.records()}
        assert set(by_id) == {"good-1", "nan-1"}
        metrics = store.metrics_frame()
        assert set(metrics[metrics.run_id == "nan-1"].name) == {"output_throughput_tok_s"}


def test_a_foreign_sqlite_database_is_refused_untouched(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "other-app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, what TEXT)")
        conn.execute("INSERT INTO runs (what) VALUES ('theirs')")
    before = path.read_bytes()
    for argv in (["store", "alerts", "--store", str(path)], ["dashboard", "--store", str(path), "-o",
                                                               str(tmp_path / "d")]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "not a sglang-repro store" in err, err
    assert path.read_bytes() == before
    with sqlite3.connect(path) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")] == ["runs"]


def test_dashboard_escapes_names_for_plotly_and_keeps_every_page(tmp_path: Path, store_url: str) -> None:
    tree = tmp_path / "tree"
    link = '<a href="https://evil.invalid">L</a>'
    stem = "s" * 80
    plan = [(stem + "-one", link, day) for day in range(1, 5)] + [(stem + "-two", "c", 1)]
    for i, (scenario, case, day) in enumerate(plan):  # four nights of one series, so it has a chart
        data = _record(f"r{i}", accept_length=2.0 + 0.01 * i)
        data["scenario"] = {"name": scenario, "file": "s.yaml"}
        data["case"] = {"name": case, "values": {}}
        data["started_at"] = f"2026-11-0{day}T01:00:00+00:00"
        data["build"] = {"kind": "sim", "spec": f"sim:post-fix,seed={day}"}
        _write(tree, f"r{i}", data)
    assert main(["store", "import", str(tree), "--store", store_url]) == 0
    out = tmp_path / "site"
    assert main(["dashboard", "--store", store_url, "-o", str(out)]) == 0
    pages = sorted(p.name for p in out.glob("scenario-*.html"))
    assert len(pages) == 2, pages  # the two names share their first 80 characters, and keep a page each
    text = "".join(p.read_text() for p in out.glob("*.html"))
    assert "https://evil.invalid" in text  # the name is there ...
    assert '<a href="https://evil.invalid"' not in text  # ... never as markup, in the HTML
    blocks = [json.loads(p.read_text().split('id="series-data">', 1)[1].split("</script>", 1)[0])
              for p in out.glob("scenario-*.html")]
    titles = [chart["title"] for block in blocks for chart in block["charts"]]
    assert titles and not any("<a " in t for t in titles), titles  # nor as plotly markup in a chart title
    assert any("&lt;a href=" in t for t in titles), titles
