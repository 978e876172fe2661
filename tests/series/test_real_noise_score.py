"""The real-noise benchmark's scorer: a change found only on the metric its knob moves, every other alert false."""

from __future__ import annotations

from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_the_step_counts_on_acceptance_only_and_the_drift_on_speed_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    from bench_real_noise import Schedule, _score

    s = Schedule(nights=18, step_night=7, drift_night=11, drift_ms=120.0, agreement=0.76)
    assert s.spec(6) == "sim:post-fix" and s.spec(7) == "sim:post-fix,draft-agreement=0.76"
    assert s.spec(18) == "sim:post-fix,draft-agreement=0.76,step-cost-ms=120"
    got = _score([(8, 7, "step", "itl_ms_p50"),  # speed near the step night: the machine's noise
                  (10, 7, "level-change", "accept_length"),  # the step, on the fourth night
                  (11, 8, "step", "accept_length"),  # a repeat of it: not a second hit, not false
                  (16, 12, "drift", "output_throughput_tok_s"),
                  (17, 3, "step", "accept_length")], s, messages=6)
    assert got == {"step_found": True, "step_delay_nights": 3, "drift_found": True, "drift_delay_nights": 5,
                   "drift_name": "drift", "false_alarms": 2, "messages_a_person_gets": 6}
    assert _score([], s, 0)["step_found"] is False
