"""The detection cache (store version 5) on SQLite and PostgreSQL: the findings through it are the
detector's own, a later review pushes only the nights since, and any other history is replayed."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pytest
from sqlalchemy import update

from harness.series import detections, screen, steps
from harness.series.detections import SeriesFindings, case_findings, findings_of
from harness.series.points import CasePoints, case_points
from harness.store.schema import detections as detections_table
from harness.store.store import Store, new_batch, open_store
from tests.helpers import make_record

CASES = ("case-a", "case-b")


def _night(store: Store, night: int, rng: np.random.Generator, *, level: float = 100.0) -> None:
    batch = new_batch("nightly", f"night-{night:03d}", started_at=f"2026-{1 + night // 28:02d}-{1 + night % 28:02d}"
                      "T02:00:00+00:00")
    recs = []
    for c, case in enumerate(CASES):
        drop = 0.85 if c == 0 and night >= 30 else 1.0  # case-a: a 15% step down at night 30
        for t in range(1 + c):  # case-b has two trials a night
            recs.append(make_record(run_id=f"n{night}-{case}-{t}", case=case, trial=t, started_at=batch.started_at,
                                    metrics={"output_throughput_tok_s": float(level * drop * (1 + 0.01 * rng.standard_normal())),
                                             "accept_length": float(2 * (1 + 0.01 * rng.standard_normal()))}))
    store.record_many(recs, batch)


def _cases(store: Store) -> list[CasePoints]:
    return case_points(store.runs_frame(), store.metrics_frame())


def _plain(cases: list[CasePoints]) -> dict[tuple[str, str, str], list[SeriesFindings]]:
    return {(cp.scenario, cp.case, cp.hardware): case_findings(cp) for cp in cases}


@pytest.fixture
def pushes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many nights the detector decides from scratch: a counter around the real ``Tracker.push``, where a
    series screened and replayed from its first point (``screen.replay``) counts all its nights, decided or
    skipped as nothing could be decided there. ``[1]``: the real pushes alone."""
    count = [0, 0]
    inside = [False]
    real_push, real_replay = steps.Tracker.push, screen.replay

    def counted(self: steps.Tracker, value: float, trials: Sequence[float] = ()) -> list[tuple[str, int]]:
        count[0] += not inside[0]
        count[1] += 1
        return real_push(self, value, trials)

    def replay(rule: steps.Rule, values: Sequence[float], trials: Sequence[Sequence[float]],
               hot: np.ndarray) -> steps.Tracker:
        count[0] += len(values)
        inside[0] = True
        try:
            return real_replay(rule, values, trials, hot)
        finally:
            inside[0] = False

    monkeypatch.setattr(steps.Tracker, "push", counted)
    monkeypatch.setattr(screen, "replay", replay)
    return count


def test_cached_findings_are_the_detectors_and_only_new_nights_are_pushed(store_url: str,
                                                                          pushes: list[int]) -> None:
    rng = np.random.default_rng(3)
    with open_store(store_url) as store:
        for night in range(40):
            _night(store, night, rng)
        cases = _cases(store)
        pushes[:] = [0, 0]
        first = findings_of(store, cases)
        cold = pushes[0]
        assert cold == 2 * 2 * 40  # two cases x two metrics x 40 nights, all replayed once
        assert pushes[1] < cold  # the single-trial series screened: only their hot nights pushed
        assert first == _plain(cases)
        steps_found = [f for sf in first[("store-test-scenario", "case-a", "cpu:test-cpu")] for f in sf.findings
                       if f.kind == "step"]
        assert [f.index for f in steps_found] == [30]  # the cache holds something worth holding
        assert len(store.detection_rows()) == 4

        _night(store, 40, rng)  # tonight
        cases = _cases(store)
        pushes[0] = 0
        again = findings_of(store, cases)
        assert pushes[0] == 4  # one night per series
        assert again == _plain(cases)
        assert {int(r["points"]) for r in store.detection_rows().values()} == {41}

        pushes[0] = 0
        assert findings_of(store, cases) == again and pushes[0] == 0  # nothing new: nothing pushed


def test_a_history_that_changed_behind_the_cache_is_replayed(store_url: str, pushes: list[int]) -> None:
    rng = np.random.default_rng(4)
    with open_store(store_url) as store:
        for night in range(1, 36):
            _night(store, night, rng)
        findings_of(store, _cases(store))
        # A night recorded late, before every other: every series' first points are now different.
        _night(store, 0, rng, level=90.0)
        cases = _cases(store)
        pushes[0] = 0
        got = findings_of(store, cases)
        assert pushes[0] == 2 * 2 * 36  # replayed in full
        assert got == _plain(cases)


def test_a_state_from_another_detector_or_of_another_shape_is_not_used(store_url: str, pushes: list[int]) -> None:
    rng = np.random.default_rng(5)
    with open_store(store_url) as store:
        for night in range(36):
            _night(store, night, rng)
        cases = _cases(store)
        expected = findings_of(store, cases)
        keys = sorted(store.detection_rows())
        with store.engine.begin() as conn:
            conn.execute(update(detections_table).where(detections_table.c.series_key == keys[0])
                         .values(detector="another-detector"))
            conn.execute(update(detections_table).where(detections_table.c.series_key == keys[1])
                         .values(state='{"segment": 0}'))
            conn.execute(update(detections_table).where(detections_table.c.series_key == keys[2])
                         .values(state="not json"))
        _night(store, 36, rng)
        cases = _cases(store)
        pushes[0] = 0
        got = findings_of(store, cases)
        assert pushes[0] == 3 * 37 + 1  # three series replayed in full, the fourth from its state
        assert got == _plain(cases)
        assert expected  # and the first pass gave findings for every case
        assert detections.DETECTOR in {r["detector"] for r in store.detection_rows().values()}


def test_a_tolerance_is_part_of_the_series_key(store_url: str) -> None:
    rng = np.random.default_rng(6)
    with open_store(store_url) as store:
        for night in range(36):
            _night(store, night, rng)
        cases = _cases(store)
        findings_of(store, cases)
        tight = {"store-test-scenario": {"output_throughput_tok_s": 0.5}}  # a 50% tolerance: no step matters
        got = findings_of(store, cases, tight)
        assert got == {(cp.scenario, cp.case, cp.hardware): case_findings(cp, tight["store-test-scenario"])
                       for cp in cases}
        assert len(store.detection_rows()) == 6  # two more series: case-a and case-b under the tolerance


def test_a_series_with_no_night_since_takes_its_suspicious_tail_from_the_cache(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(6)
    tails = [0]
    real = steps.Tracker.suspicious

    def counted(self: steps.Tracker) -> steps.Finding | None:
        tails[0] += 1
        return real(self)

    monkeypatch.setattr(steps.Tracker, "suspicious", counted)
    with open_store(store_url) as store:
        for night in range(30):
            _night(store, night, rng)
        _night(store, 30, rng, level=80.0)  # tonight far below: a suspicious tail, not yet a step
        cases = _cases(store)
        first = findings_of(store, cases)
        assert tails[0] == 4 and first == _plain(cases)
        assert any(f.kind == "suspicious" for sfs in first.values() for sf in sfs for f in sf.findings)
        tails[0] = 0
        assert findings_of(store, cases) == first and tails[0] == 0  # every tail from the cache
        # A row cached before the tail was (its state without the key): restored, its tail computed.
        key = sorted(store.detection_rows())[0]
        row = store.detection_rows()[key]
        state = json.loads(row["state"])
        del state[detections._TAIL]
        with store.engine.begin() as conn:
            conn.execute(update(detections_table).where(detections_table.c.series_key == key)
                         .values(state=json.dumps(state)))
        tails[0] = 0
        assert findings_of(store, cases) == first and tails[0] == 1
