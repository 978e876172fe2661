"""A cold store's replays spread over forked workers (``detections._detect_many``) give the findings and the cached
rows a replay in this process gives, bit for bit, and a pool that cannot start leaves the work here."""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.series import detections
from harness.series.detections import case_findings, findings_of
from harness.series.points import SERIES_KINDS, stored_case_points
from harness.store.store import Store, new_batch, open_store
from tests.helpers import make_record


def _fill(store: Store, nights: int = 40, cases: int = 6) -> None:
    rng = np.random.default_rng(11)
    for night in range(nights):
        batch = new_batch("nightly", f"night-{night:03d}",
                          started_at=f"2026-{1 + night // 28:02d}-{1 + night % 28:02d}T02:00:00+00:00")
        recs = []
        for c in range(cases):
            drop = 0.8 if c % 2 == 0 and night >= 20 else 1.0  # every other case: a 20% step at night 20
            recs.append(make_record(run_id=f"n{night}-c{c}", case=f"case-{c}", started_at=batch.started_at, metrics={
                "output_throughput_tok_s": float(100 * drop * (1 + 0.02 * rng.standard_normal())),
                "accept_length": float(2 * (1 + 0.01 * rng.standard_normal()))}))
        store.record_many(recs, batch)


def _rows(store: Store) -> dict[str, tuple[Any, ...]]:
    return {k: (v["points"], v["inputs"], v["state"], v["detector"]) for k, v in store.detection_rows().items()}


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork on this platform")
def test_replays_in_workers_are_the_same_findings_and_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pools: list[int] = []
    real_context = multiprocessing.get_context

    class Counted:
        def __init__(self, method: str) -> None:
            self.ctx = real_context(method)

        def Pool(self, workers: int, initializer: Any = None) -> Any:
            pools.append(workers)
            return self.ctx.Pool(workers, initializer=initializer)

    # Under pytest-xdist the worker has execnet's thread beside the test's: counted as this process alone, as the CLI is.
    monkeypatch.setattr(detections.threading, "active_count", lambda: 1)
    got: dict[str, Any] = {}
    for label, minimum in (("here", 10**9), ("workers", 0)):
        monkeypatch.setattr(detections, "PARALLEL_MIN_REPLAYS", minimum)
        monkeypatch.setattr(detections, "_workers", lambda: 2)
        monkeypatch.setattr(detections.multiprocessing, "get_context", Counted)
        with open_store(f"sqlite:///{tmp_path / label}.db") as store:
            _fill(store)
            cases = stored_case_points(store, SERIES_KINDS)
            got[label] = findings_of(store, cases)
            got[label + " rows"] = _rows(store)
            plain = {(cp.scenario, cp.case, cp.hardware): case_findings(cp) for cp in cases}
        assert got[label] == plain
    assert pools == [2]  # the second arm ran in a pool of two, the first here
    assert got["workers"] == got["here"] and got["workers rows"] == got["here rows"]
    steps_found = [f for found in got["workers"].values() for sf in found for f in sf.findings if f.kind == "step"]
    assert len(steps_found) >= 3  # the replays found what the history holds: there was something to agree on
    assert detections._WORK == []  # nothing of the replays kept after the pool


def test_a_pool_that_cannot_start_leaves_the_replays_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Refused:
        def __init__(self, method: str) -> None:
            pass

        def Pool(self, workers: int, initializer: Any = None) -> Any:
            raise OSError("Resource temporarily unavailable")

    monkeypatch.setattr(detections, "PARALLEL_MIN_REPLAYS", 0)
    monkeypatch.setattr(detections, "_workers", lambda: 2)
    monkeypatch.setattr(detections.multiprocessing, "get_context", Refused)
    with open_store(f"sqlite:///{tmp_path / 'refused'}.db") as store:
        _fill(store, nights=30, cases=2)
        cases = stored_case_points(store, SERIES_KINDS)
        assert findings_of(store, cases) == {(cp.scenario, cp.case, cp.hardware): case_findings(cp) for cp in cases}
        assert len(store.detection_rows()) == 4


def test_a_process_with_another_thread_replays_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pools: list[int] = []

    class Counted:
        def __init__(self, method: str) -> None:
            pass

        def Pool(self, workers: int, initializer: Any = None) -> Any:
            pools.append(workers)
            raise AssertionError("no pool with another thread alive")

    monkeypatch.setattr(detections, "PARALLEL_MIN_REPLAYS", 0)
    monkeypatch.setattr(detections, "_workers", lambda: 2)
    monkeypatch.setattr(detections.multiprocessing, "get_context", Counted)
    release = threading.Event()
    other = threading.Thread(target=release.wait, daemon=True)
    other.start()
    try:
        with open_store(f"sqlite:///{tmp_path / 'threads'}.db") as store:
            _fill(store, nights=30, cases=2)
            cases = stored_case_points(store, SERIES_KINDS)
            assert findings_of(store, cases) == {(cp.scenario, cp.case, cp.hardware): case_findings(cp) for cp in cases}
    finally:
        release.set()
        other.join(timeout=5)
    assert pools == []
