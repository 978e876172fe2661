"""A case's points as columns (``CasePoints`` read from the store): the dashboard built from them is
the one built from ``Point`` objects, it makes a ``Point`` only for the points a page shows, and the
arrays the detector's screen and cache read say what the tuples say."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import pytest

from harness.dashboard import site
from harness.incidents.review import review
from harness.records.outcome import Outcome
from harness.series import detections, screen
from harness.series import points as series_module
from harness.series.points import SERIES_KINDS, CasePoints, Point, stored_case_points
from harness.store.store import new_batch, open_store
from tests.helpers import make_record
from tests.store.test_series_read import _varied_store

NIGHTS = 40


def _long_store(url: str, tmp_path: Path) -> None:
    """Two cases over NIGHTS nights: a step, a crash, some nights of three trials, phase figures on the
    last nights, reviewed night by night (so the store holds incidents and cached detections)."""
    rng = random.Random(11)
    with open_store(url) as store:
        for night in range(NIGHTS):
            when = f"2026-10-{1 + night // 2:02d}T0{night % 2}:00:00+00:00"  # two nights a day
            batch = new_batch("nightly", f"night-{night:02d}", started_at=when)
            art = tmp_path / "runs" / f"n{night}"
            art.mkdir(parents=True)
            recs = []
            for t in range(3 if night % 5 == 0 else 1):
                m = {"accept_length": 1.84 * (1 + 0.01 * rng.gauss(0, 1)),
                     "output_throughput_tok_s": (200.0 if night < 25 else 160.0) * (1 + 0.02 * rng.gauss(0, 1))}
                if night >= NIGHTS - 4:
                    m.update({"accept_length@baseline": 1.8 + rng.random() / 10, "accept_length@after": 1.7})
                recs.append(make_record(run_id=f"n{night}-a{t}", case="a", trial=t, started_at=batch.started_at,
                                        commit=f"{night:04d}abcdef", artifacts=str(art), metrics=m))
            recs.append(make_record(run_id=f"n{night}-b", case="b", started_at=batch.started_at, artifacts=str(art),
                                    outcome=Outcome.CRASH if night in (30, 31) else Outcome.PASS,
                                    signature="sig-x" if night in (30, 31) else None,
                                    metrics={} if night in (30, 31) else {"accept_length": 1.5 + rng.random() / 100}))
            store.record_many(recs, batch)
            review(store, batch.id)


def _pages(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def test_the_dashboard_from_columns_is_the_dashboard_from_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "results.db"
    _long_store(str(db), tmp_path)
    made: list[int] = []
    real_point = series_module._point

    def counting(runs: object, rows: list[int]) -> Point:
        made.append(len(rows))
        return real_point(runs, rows)  # type: ignore[arg-type]

    with open_store(str(db)) as store:
        monkeypatch.setattr(series_module, "_point", counting)
        site.build_site(store, tmp_path / "columns")
        columns_made = len(made)
        monkeypatch.undo()

        # The same cases made from their Point objects: every question answered from the points.
        def from_points(s: object, kinds: Sequence[str] = SERIES_KINDS) -> list[CasePoints]:
            return [CasePoints(cp.scenario, cp.scenario_file, cp.case, cp.hardware, cp.points)
                    for cp in stored_case_points(store, kinds)]

        monkeypatch.setattr(site, "stored_case_points", from_points)
        site.build_site(store, tmp_path / "points")
    a, b = _pages(tmp_path / "columns"), _pages(tmp_path / "points")
    assert a.keys() == b.keys() and len(a) == 4
    for name in a:
        assert a[name] == b[name], name  # byte for byte
    text = a["scenario-store-test-scenario.html"].decode()
    assert "Workload phases" in text and '"kind":"step"' in text and '"kind":"incident"' in text
    assert '"trials_x"' in text  # a series with nights of three trials
    # Points made: the last-nights tables (8 a case), the overview's latest, the resets, the phases'
    # last nights: a handful, not one per night.
    assert 0 < columns_made <= 2 * 8 + 8, columns_made


def test_a_series_arrays_say_what_its_tuples_say(store_url: str) -> None:
    _varied_store(store_url)
    with open_store(store_url) as store:
        cases = stored_case_points(store)
    seen_multi = False
    for cp in cases:
        for metric in cp.metric_names:
            idx, values = cp.series(metric)
            trials = cp.trials(metric)
            tuples = [cp.point(i).metrics[metric] for i in idx]
            assert list(trials) == tuples and trials == tuples and trials[1:3] == tuples[1:3]
            assert len(trials) == len(tuples) and (not tuples or trials[-1] == tuples[-1])
            seen_multi |= any(len(t) > 1 for t in tuples)
            # The screen and the cache's digest read the arrays: the same answers as from the tuples.
            assert screen.screenable(trials, values) == screen.screenable(tuples, values)
            for n in range(len(values) + 1):
                assert detections._inputs_digest(values, trials, n) == detections._inputs_digest(values, tuples, n)
            cols = cp.series_columns(metric)
            assert cols is not None and cols.one_trial == all(len(t) == 1 for t in tuples)
        # The columns a page reads without making points are the points' fields.
        for name in ("batch_id", "batch_label", "started_at", "build_key", "build_spec", "build_version",
                     "build_commit"):
            assert cp.column(name) == [getattr(p, name) for p in cp.points]
        assert cp.build_labels() == [p.build_label for p in cp.points]
        assert cp.n_points == len(cp.points) and cp.point(-1) == cp.points[-1]
    assert seen_multi
    with pytest.raises(IndexError):
        cases[0].point(cases[0].n_points)
