"""The series read without frames (``stored_case_points``) gives the points the frames give, on SQLite and
PostgreSQL, for a store with every kind of point; and the detector's inputs added at once are the ones
added night by night."""

from __future__ import annotations

import dataclasses
import random

import numpy as np

from harness.records.outcome import Outcome
from harness.records.run_record import GpuInfo, HostInfo
from harness.series import screen
from harness.series.points import case_points, stored_case_points
from harness.series.steps import Rule, Tracker
from harness.store.store import new_batch, open_store
from tests.helpers import make_record


def _varied_store(url: str) -> None:
    rng = random.Random(7)
    with open_store(url) as store:
        for night in range(6):
            batch = new_batch("nightly", f"night-{night}", started_at=f"2026-11-{night + 1:02d}T02:00:00+00:00")
            recs = []
            for t in range(3 if night % 2 else 1):  # some nights three trials, some one
                recs.append(make_record(run_id=f"n{night}-a-{t}", case="a", trial=t, started_at=batch.started_at,
                                        spec="sim:post-fix" if night < 4 else "sim:pre-fix", commit=f"c{night}",
                                        metrics={"accept_length": rng.uniform(1.7, 1.9),
                                                 "output_throughput_tok_s": rng.uniform(190, 210)}))
            # A crash (no numbers), an infra run (never in a series), a failing run with numbers.
            recs.append(make_record(run_id=f"n{night}-b", case="b", started_at=batch.started_at,
                                    outcome=(Outcome.CRASH, Outcome.INFRA, Outcome.FAIL, Outcome.PASS)[night % 4],
                                    signature="sig-x" if night % 4 == 0 else None,
                                    metrics={"accept_length": 1.5 + night / 10, "ttft_ms_p50": 30.0 + night}))
            # The same case on a GPU host whose driver changes: its own series, with a host change.
            gpu = HostInfo(hostname="g1", gpus=(GpuInfo(0, "H200"),), driver_version="550" if night < 3 else "560",
                           cuda_version="12.4", platform="linux")
            recs.append(dataclasses.replace(make_record(run_id=f"n{night}-g", case="a", started_at=batch.started_at,
                                                        metrics={"accept_length": 1.8}), host=gpu))
            store.record_many(recs, batch)
        # A compare batch stays out of every series; a run with no metrics at all is a point without values.
        store.record_many([make_record(run_id="cmp-1", case="a", started_at="2026-11-03T05:00:00+00:00")],
                          new_batch("compare", "ab", started_at="2026-11-03T05:00:00+00:00"))
        store.record_many([make_record(run_id="late", case="c", metrics={}, started_at="2026-11-09T02:00:00+00:00")],
                          new_batch("run", "one", started_at="2026-11-09T02:00:00+00:00"))


def test_stored_case_points_are_the_frames_points(store_url: str) -> None:
    _varied_store(store_url)
    with open_store(store_url) as store:
        fast = stored_case_points(store)
        frames = case_points(store.runs_frame(), store.metrics_frame())
    assert fast == frames  # every field of every point, in order
    assert [(cp.case, cp.hardware, len(cp.points)) for cp in fast] == [
        (cp.case, cp.hardware, len(cp.points)) for cp in frames]
    a = next(cp for cp in fast if cp.case == "a" and cp.hardware.startswith("cpu:"))
    assert [len(p.metrics["accept_length"]) for p in a.points] == [1, 3, 1, 3, 1, 3]
    b = next(cp for cp in fast if cp.case == "b")
    assert [p.outcome for p in b.points] == [Outcome.CRASH, None, Outcome.FAIL, Outcome.PASS, Outcome.CRASH, None]
    assert b.series("ttft_ms_p50") == ([2, 3], [32.0, 33.0])  # only pass and fail runs give values
    gpu = next(cp for cp in fast if cp.hardware == "1xH200")
    assert [p.host.get("driver") for p in gpu.points] == ["550"] * 3 + ["560"] * 3
    for x, y in zip(fast, frames):  # the one-pass series are each point's own value
        for metric in x.metric_names:
            idx, vals = x.series(metric)
            assert vals == [x.points[i].value(metric) for i in idx]
            assert x.trials(metric) == [x.points[i].metrics[metric] for i in idx]
            assert (idx, vals) == y.series(metric)


def test_an_empty_store_has_no_points(store_url: str) -> None:
    with open_store(store_url) as store:
        assert stored_case_points(store) == []


def test_points_added_at_once_are_the_points_added_night_by_night() -> None:
    rng = np.random.default_rng(1)
    values = [float(v) for v in 100 + rng.standard_normal(40)]
    one = [(v,) for v in values]
    mixed = [(v,) if i % 5 else (v, v * 1.01, v * 0.99) for i, v in enumerate(values)]
    for trials in (one, mixed, [()] * 40):
        looped, bulk = Tracker(Rule(0.05, True)), Tracker(Rule(0.05, True))
        for i in range(3, 30):
            looped._add(values[i], trials[i])
        screen.add_points(bulk, values, trials, 3, 30)
        assert vars(bulk) == vars(looped)
        assert all(type(v) is float for v in bulk.y)
