"""Nights recorded into a real store and reviewed one by one, as the nightly does: a drift, a slowdown."""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np

from harness.incidents.review import Review, review
from harness.store.store import Store, new_batch
from tests.helpers import make_record

CASES = ("tokens=276", "tokens=1024", "tokens=4096")


def drift_levels(nights: int = 48, start: int = 30, seed: int = 0) -> list[list[float]]:
    """Three trials a night of an acceptance length (a 2% rule) that slides 20% over 60 nights from ``start``,
    under 1% bimodal noise (each trial 1% above or below, plus 0.3%): a slide that, ten nights in, fits a
    step as well."""
    rng = np.random.default_rng(seed)
    level = 2.0 * (1 - 0.2 * np.clip((np.arange(nights) - start) / 60, 0, None))
    return [list(level[i] * (1 + 0.01 * rng.choice([-1, 1], 3) + 0.003 * rng.standard_normal(3)))
            for i in range(nights)]


def record_drift(store: Store, nights: int = 48, seed: int = 0,
                 after: Callable[[int, Review], None] | None = None,
                 levels: list[list[float]] | None = None) -> list[Review]:
    """The drift's nights into ``store``, each reviewed; the reviews, night by night. ``after``: called with
    each night and its review (what a person does between nightlies); ``levels``: other nights' trials of the
    acceptance length instead of ``drift_levels``."""
    out = []
    for night, trials in enumerate(levels if levels is not None else drift_levels(nights, seed=seed), start=1):
        batch = new_batch("nightly", f"night-{night:02d}", started_at=_day(night))
        store.record_many([make_record(run_id=f"d{night}-t{t}", trial=t, started_at=batch.started_at,
                                       metrics={"accept_length": v}) for t, v in enumerate(trials)], batch)
        out.append(review(store, batch.id))
        if after is not None:
            after(night, out[-1])
    return out


def _day(night: int) -> str:
    return f"2026-{1 + (night - 1) // 28:02d}-{1 + (night - 1) % 28:02d}T02:00:00+00:00"


def record_slowdown(store: Store, nights: range, slow: Callable[[int], bool], rng: random.Random,
                    speed: Callable[[int], float] | None = None) -> list[Review]:
    """A build 15% slower (throughput, ITL, E2E) on every case on the nights ``slow`` says (``speed``: the
    night's speed instead, 1 the fast build's); 2% noise, 3 trials. 15%: inside the large-change band of a
    young series (25% for throughput and latency), so what raises it is the step rule, on its fourth night."""
    out = []
    for night in nights:
        batch = new_batch("nightly", f"night-{night:02d}", started_at=_day(night))
        spec = "sim:post-fix,step-cost-ms=20" if slow(night) else "sim:post-fix"
        factor = speed(night) if speed else 0.85 if slow(night) else 1.0
        records = []
        for case in CASES:
            for t in range(3):
                def noisy(v: float) -> float:
                    return v * (1 + 0.02 * rng.gauss(0, 1))
                records.append(make_record(run_id=f"n{night}-{case}-t{t}", case=case, spec=spec, trial=t,
                                           started_at=batch.started_at,
                                           metrics={"accept_length": noisy(1.84),
                                                    "output_throughput_tok_s": noisy(200.0 * factor),
                                                    "itl_ms_p50": noisy(20.0 / factor),
                                                    "e2e_ms_p50": noisy(700.0 / factor)}))
        store.record_many(records, batch)
        out.append(review(store, batch.id))
    return out


def record_speed_slide(store: Store, nights: int, start: int, rng: random.Random) -> list[Review]:
    """One case whose step cost rises 3% a night from ``start``: ITL and E2E climb, throughput falls, each
    metric with noise of its own (1%, 4%, 6%), so each sees the slide begin on a night of its own; 2 trials."""
    out = []
    for night in range(1, nights + 1):
        batch = new_batch("nightly", f"night-{night:02d}", started_at=_day(night))
        slow = 1.0 + 0.03 * max(0, night - start)
        store.record_many([make_record(run_id=f"n{night}-t{t}", spec=f"sim:post-fix,step-cost-ms={max(0, night - start)}",
                                       trial=t, started_at=batch.started_at,
                                       metrics={"accept_length": 1.84 * (1 + 0.01 * rng.gauss(0, 1)),
                                                "itl_ms_p50": 20.0 * slow * (1 + 0.01 * rng.gauss(0, 1)),
                                                "e2e_ms_p50": 700.0 * slow * (1 + 0.04 * rng.gauss(0, 1)),
                                                "output_throughput_tok_s": 200.0 / slow * (1 + 0.06 * rng.gauss(0, 1))})
                           for t in range(2)], batch)
        out.append(review(store, batch.id))
    return out
