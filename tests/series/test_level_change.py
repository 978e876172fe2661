"""A level change: raised once when a step and the start of a slide fit alike, renamed in place when the nights tell."""

from __future__ import annotations

import json

import numpy as np

from harness.series.steps import RENAMED, Rule, Tracker
from harness.store.store import open_store
from harness.store.transfer import export_store
from tests.series.grid import GridHistory, grid
from tests.series.heldout import heldout
from tests.series.nights import drift_levels, record_drift
from tests.series.scoring import score_history


def _replay(levels: list[list[float]], rule: Rule) -> tuple[Tracker, list[tuple[int, str, int]]]:
    tracker = Tracker(rule)
    said = []
    for night, trials in enumerate(levels):
        said += [(night, kind, index) for kind, index in tracker.push(float(np.median(trials)), trials)]
    return tracker, said


def test_a_drift_is_one_alert_finally_named_drift_however_it_was_first_raised() -> None:
    born_level = 0
    for seed in range(10):
        tracker, said = _replay(drift_levels(90, seed=seed), Rule(0.02))
        raised = [s for s in said if not s[1].startswith(RENAMED)]
        assert len(raised) == 1, (seed, said)  # one alert per episode, renames or not
        (found,) = tracker.findings
        assert found.kind == "drift", (seed, said)
        if found.names:  # born a level change: renamed in place, same first bad night
            born_level += 1
            assert [n[1] for n in found.names] == ["level-change", "drift"] and found.first_name == "level-change"
            assert said == [(found.names[0][0], "level-change", found.index),
                            (found.names[1][0], RENAMED + "drift", found.index)], said
            assert all("RSS step" in n[2] for n in found.names)  # the evidence of each name
    assert born_level >= 5, born_level  # the case the issue is about: a slide ten nights in fits a step


def test_a_clear_step_is_named_step_and_never_drift() -> None:
    rng = np.random.default_rng(4)
    levels = [list((2.0 if n < 30 else 1.7) * (1 + 0.01 * rng.standard_normal(3))) for n in range(60)]
    tracker, said = _replay(levels, Rule(0.02))
    assert [kind for _, kind, _ in said if not kind.startswith(RENAMED)] in (["step"], ["level-change"])
    (found,) = tracker.findings
    assert found.kind == "step" and found.index == 30, said


def test_the_store_renames_the_incident_in_place_and_says_each_transition_once(run_cli, tmp_path) -> None:
    db = tmp_path / "r.db"
    with open_store(f"sqlite:///{db}") as store:
        reviews = record_drift(store)
        (row,) = store.alert_rows()
    said = {night: r.transitions() for night, r in enumerate(reviews, start=1) if r.transitions()}
    # Nights 41 and 44: the same one incident, renamed once (40 and 41 before a short segment's step threshold was
    # raised for its noise read from fewer points, issue 47's second round; 44 and 46 until the third round read the
    # bimodal noise's first differences by a trimmed mean, not their MAD, which a noise that switches modes widens).
    assert [(n, line.split()[0]) for n, lines in said.items() for line in lines] == [(41, "INCIDENT"), (44, "RENAMED")]
    assert "LEVEL-CHANGE accept_length" in said[41][0]
    assert said[44][0].startswith(f"RENAMED incident {row['incident']}: level-change -> drift")
    assert row["kind"] == "drift" and row["state"] == "open"
    names = json.loads(row["names"])
    assert [(n["night"], n["name"]) for n in names] == [("night-41", "level-change"), ("night-44", "drift")]
    listed = run_cli("store", "alerts", "--store", str(db))
    assert listed.returncode == 0, listed.stderr
    assert "names: level-change (night-41) -> drift (night-44)" in listed.stdout
    assert f"INCIDENT {row['incident']} open " in listed.stdout
    out = tmp_path / "hud.json"
    with open_store(f"sqlite:///{db}") as store:
        export_store(store, "hud", out)
    # Every night it is open is marked (first bad night-36 to the newest, night-48), with strings only: the
    # HUD's metric.extra_info is Map(String, String).
    marked = [r for r in json.loads(out.read_text()) if "incident" in r["metric"]["extra_info"]]
    assert [(r["benchmark"]["extra_info"]["batch"], r["metric"]["name"]) for r in marked] == [
        (f"night-{n}", "accept_length") for n in range(36, 49)]
    assert all({k: v for k, v in r["metric"]["extra_info"].items() if k.startswith("incident")} == {
        "incident": row["incident"], "incident_kind": "drift", "incident_state": "open",
        "incident_names": "level-change (night-41) -> drift (night-44)"} for r in marked)


def test_a_level_change_that_moves_on_the_same_way_is_renamed_drift_not_raised_again() -> None:
    # Seed set 1 (the tuning set) of the grid: a -20% slide over 52 nights under 6% Gaussian noise, which the
    # noise made a staircase: a drop of 10% at night 13, flat, another of 8% at night 36. Before, the first
    # was raised as a step and the second as a new level change: two alerts for one drift.
    history = next(h for h in grid(1) if h.seed == 1_000_275)
    assert history.kind == "drift" and history.change == 7
    out = score_history(history, lambda: Tracker(Rule(0.02)))
    # Night 22 (20 before the noise model counted night-to-night correlation of the residuals, 22 before a short
    # segment's step threshold was raised for its noise read from fewer points, 27 until issue 47's third round
    # pooled a split's residual spread over both sides and widened it for AR(1) noise by the split's own variance).
    assert [(night, kind) for night, kind, _ in out.alerts] == [(22, "level-change")], out.alerts
    assert out.names == ["drift"] and out.repeats == 0 and out.false_alarms == 0
    tracker, said = _replay([list(t) for t in history.trials if t], Rule(0.02))
    (found,) = tracker.findings
    # Named drift by the second change the same way, 21 nights after it (as before issue 47's second round; in that
    # round, raised at night 27, it was named by the fits).
    assert [n[1] for n in found.names] == ["level-change", "drift"], found.names
    assert "moved on the same way" in found.names[1][2], found.names
    assert [kind for _, kind, _ in said] == ["level-change", RENAMED + "drift"], said


def _held_out_drift() -> GridHistory:
    # Issue 47's fresh tune set 304: a -21% slide from night 12 to 55 under AR(1) noise of 2.8%, which the step rule
    # confirms as a step at night 15 on night 22 (15 points before it: past LEVEL_SHORT, and the slide tests do not
    # fire on the segment's first 22 nights).
    history = next(h for h in heldout(304, "points") if h.kind == "drift" and h.family == "ar1" and h.change == 12)
    assert history.change_end == 55
    return history


def test_a_step_the_level_slides_on_after_is_renamed_drift_in_place() -> None:
    tracker, said = _replay([list(t) for t in _held_out_drift().trials], Rule(0.02))
    # One alert, raised a step; 25 nights later the drift rule fires the same way over the segment the step began:
    # renamed drift in place (same first bad night), the name it was raised under kept first (the fingerprint's).
    assert said == [(22, "step", 15), (47, RENAMED + "drift", 15)], said
    (found,) = tracker.findings
    assert found.kind == "drift" and found.first_name == "step", found
    assert [(night, name) for night, name, _ in found.names] == [(22, "step"), (47, "drift")]
    assert found.names[1][2].startswith("drift rule t=-"), found.names


def test_the_store_renames_a_step_the_level_slid_on_after_once(tmp_path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'r.db'}") as store:
        reviews = record_drift(store, levels=[list(t) for t in _held_out_drift().trials])
        (row,) = [r for r in store.alert_rows() if r["kind"] != "transient"]  # two one-night dips are transients
    said = {night: r.transitions() for night, r in enumerate(reviews, start=1) if r.transitions()}
    # The tracker's nights 22 and 47 are the store's night-23 and night-48 (its nights count from 1).
    assert [(n, line.split()[0]) for n, lines in said.items() for line in lines] == [(23, "INCIDENT"), (48, "RENAMED")]
    assert said[48][0].startswith(f"RENAMED incident {row['incident']}: step -> drift"), said[48]
    assert row["kind"] == "drift" and row["state"] == "open"
    assert [(n["night"], n["name"]) for n in json.loads(row["names"])] == [("night-23", "step"), ("night-48", "drift")]


def test_past_its_window_a_step_keeps_its_name() -> None:
    class Narrow(Tracker):
        level_window = 20  # the rename above came 25 nights after the alert

    narrow = Narrow(Rule(0.02))
    said = [(night, kind, index) for night, trials in enumerate(_held_out_drift().trials)
            for kind, index in narrow.push(float(np.median(trials)), trials)]
    assert said == [(22, "step", 15)], said
    (found,) = narrow.findings
    assert found.kind == "step" and found.names == ()
