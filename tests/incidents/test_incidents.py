"""One incident per change: a slowdown of one build on several cases and metrics, and the next step it prints."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from harness.alerts.alert import Alert
from harness.incidents.incident import Incident, group, next_step
from harness.incidents.review import review
from harness.records.outcome import Outcome
from harness.series.points import Point
from harness.series.steps import Rule
from harness.series.transients import transient_at_end
from harness.store.store import new_batch, open_store
from harness.store.transfer import export_store
from tests.helpers import make_record
from tests.series.nights import CASES, drift_levels, record_drift, record_slowdown, record_speed_slide

# A claim about the harness, not the model: its reference servers are the torch-free stand-in (tests/conftest.py).
pytestmark = pytest.mark.standin


def test_a_slowdown_of_one_build_on_three_cases_is_one_incident_with_a_runnable_next_step(tmp_path) -> None:
    rng = random.Random(3)
    with open_store(f"sqlite:///{tmp_path / 'r.db'}") as store:
        reviews = record_slowdown(store, range(1, 14), lambda n: n >= 7, rng)
    incidents = [i for r in reviews for i in r.incidents]
    assert len(incidents) == 1, [i.describe() for i in incidents]
    (incident,) = incidents
    metrics = {(a.case, a.metric) for a in incident.alerts}
    assert {c for c, _ in metrics} == set(CASES)
    assert {m for _, m in metrics} == {"output_throughput_tok_s", "itl_ms_p50", "e2e_ms_p50"}
    effects = [abs(a.effect or 0) for a in incident.alerts]
    assert effects == sorted(effects, reverse=True)
    text = incident.describe()
    assert text.count("\n    cases: ") == 1 and text.count("\n    moved: ") == 1
    # Two reference-server specs have no history between them: compare, not bisect.
    assert incident.next_step.startswith("sglang-repro compare scenarios/store-test-scenario.yaml --case ")
    assert incident.next_step.endswith("--before sim:post-fix --after sim:post-fix,step-cost-ms=20")


def _point(spec: str, version: str | None = None, commit: str | None = None, night: int = 1) -> Point:
    return Point(f"b{night}", f"night-{night}", f"2026-01-{night:02d}", f"k-{spec}", spec, version, commit,
                 Outcome.PASS, (), {}, ())


def _alert(good: Point | None, bad: Point, **kw) -> Alert:
    return Alert("fp", "step", "sc", "c1", "cpu:x", "output_throughput_tok_s", None, good, bad, -0.2, "", "",
                 "scenarios/sc.yaml", 150.0, **kw)


def test_the_next_step_fits_what_the_two_builds_are() -> None:
    rel = _alert(_point("pip:sglang==0.5.14", "0.5.14"), _point("pip:sglang==0.5.15", "0.5.15", night=2))
    assert next_step(rel) == ("sglang-repro bisect scenarios/sc.yaml --case c1 --releases 0.5.14..0.5.15 "
                              "--metric output_throughput_tok_s --threshold 150")
    src = _alert(_point("src:/ck/sglang@a1", commit="a1"), _point("src:/ck/sglang@b2", commit="b2", night=2))
    assert next_step(src) == ("sglang-repro bisect scenarios/sc.yaml --case c1 --repo /ck/sglang --good a1 --bad b2 "
                              "--metric output_throughput_tok_s --threshold 150")
    py = _alert(_point("python:/envs/a"), _point("python:/envs/b", night=2))
    assert next_step(py) == ("sglang-repro compare scenarios/sc.yaml --case c1 --before python:/envs/a "
                             "--after python:/envs/b")
    first = _alert(None, _point("sim:pre-fix"))
    assert next_step(first) == "sglang-repro run scenarios/sc.yaml --case c1 --build sim:pre-fix"


def test_alerts_of_different_builds_or_hardware_are_different_incidents() -> None:
    a = _alert(_point("sim:a"), _point("sim:b", night=2))
    other_build = _alert(_point("sim:a"), _point("sim:c", night=2))
    assert len(group([a, other_build])) == 2


def test_a_kernel_update_keeps_the_series_and_shows_as_a_host_fact(tmp_path) -> None:
    from harness.series.points import case_points, host_changes, series_hardware

    assert series_hardware("cpu:Linux-6.18.44-cloud-amd64-x86_64-with-glibc2.36") == "cpu:Linux-x86_64"
    assert series_hardware("2xNVIDIA H100", "NVIDIA H100", 2) == "2xNVIDIA H100"
    assert series_hardware("cpu:Linux-6.1-x86_64-with-glibc2.36", cpu="AMD EPYC 7763") == "cpu:AMD EPYC 7763"
    with open_store(f"sqlite:///{tmp_path / 'r.db'}") as store:
        for night in (1, 2):
            batch = new_batch("nightly", f"night-{night}", started_at=f"2026-11-0{night}T02:00:00+00:00")
            record = make_record(run_id=f"n{night}", started_at=batch.started_at)
            kernel = "6.18.44" if night == 1 else "6.18.52"
            host = type(record.host)(hostname="ci-1", platform=f"Linux-{kernel}-x86_64-with-glibc2.36")
            store.record_many([type(record)(**{**record.__dict__, "host": host})], batch)
        (cp,) = case_points(store.runs_frame(), store.metrics_frame())
    assert cp.hardware == "cpu:Linux-x86_64" and len(cp.points) == 2
    assert host_changes(cp) == [(1, "platform Linux-6.18.44-x86_64-with-glibc2.36 -> "
                                    "Linux-6.18.52-x86_64-with-glibc2.36")]


def test_a_series_of_this_host_survives_a_kernel_update(tmp_path) -> None:
    """This machine's own host facts (its CPU model from /proc/cpuinfo) recorded before and after a kernel
    update (the platform string changes, nothing else): one series, keyed by core count and CPU model."""
    import dataclasses

    from harness.series.points import case_points, host_changes
    from harness.server.hardware import host_info

    here = host_info()
    assert here.cpu, "this host's /proc/cpuinfo names no CPU model"
    with open_store(f"sqlite:///{tmp_path / 'r.db'}") as store:
        for night, kernel in ((1, "6.1.0-40"), (2, "6.1.0-41"), (3, "6.12.9")):
            batch = new_batch("nightly", f"night-{night}", started_at=f"2026-11-0{night}T02:00:00+00:00")
            record = make_record(run_id=f"n{night}", started_at=batch.started_at)
            host = dataclasses.replace(here, platform=f"Linux-{kernel}-amd64-x86_64-with-glibc2.36")
            store.record_many([dataclasses.replace(record, host=host)], batch)
        (cp,) = case_points(store.runs_frame(), store.metrics_frame())
    assert cp.hardware == f"cpu:{here.cpu_count}x{here.cpu}" and len(cp.points) == 3
    assert [i for i, _ in host_changes(cp)] == [1, 2]
    assert "platform Linux-6.1.0-41-amd64-x86_64-with-glibc2.36 -> Linux-6.12.9" in host_changes(cp)[1][1]


def test_a_slowdown_on_several_cases_opens_one_incident_once_and_store_ack_resolves_it(run_cli, tmp_path) -> None:
    """One build slower on three cases (throughput, ITL, E2E each): one incident, opened once; each night says
    only its transitions; ``store ack`` resolves it as accepted; the slow nights after it say nothing."""
    rng = random.Random(3)
    db = tmp_path / "r.db"
    with open_store(f"sqlite:///{db}") as store:
        reviews = record_slowdown(store, range(1, 14), lambda n: n >= 7, rng)
        fingerprints = {r["fingerprint"] for r in store.alert_rows() if r["state"] != "transient"}
    said = [(n, line) for n, r in enumerate(reviews, start=1) for line in r.transitions()]
    opened = [(n, line) for n, line in said if line.startswith("INCIDENT ")]
    assert len(opened) == 1 and not [x for x in said if x not in opened], said  # opened once, nothing else said
    (incident,) = [i for r in reviews for i in r.incidents]
    assert len(fingerprints) == len(incident.alerts) >= 6  # three cases x (throughput, ITL, E2E)
    listed = run_cli("store", "alerts", "--store", str(db))
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.count("INCIDENT ") == 1 and f"INCIDENT {incident.fingerprint} open " in listed.stdout
    assert listed.stdout.count("\n    cases: ") == 1 and listed.stdout.count("\n    moved: ") == 1
    assert f"    next: {incident.next_step}" in listed.stdout
    # One of its alerts' fingerprints names the whole incident too.
    ack = run_cli("store", "ack", sorted(fingerprints)[0], "--store", str(db))
    assert ack.returncode == 0 and f"1 incident(s) resolved: accepted ({len(fingerprints)} open alert(s))" in ack.stdout
    with open_store(f"sqlite:///{db}") as store:
        assert {(r["state"], r["resolution"]) for r in store.alert_rows() if r["state"] != "transient"} == {
            ("resolved", "accepted")}
        later = record_slowdown(store, range(14, 20), lambda n: True, rng)  # the new level is the baseline
        assert [r.transitions() for r in later] == [[]] * 6
        assert {r["fingerprint"] for r in store.alert_rows() if r["state"] != "transient"} == fingerprints
    assert "INCIDENT" not in run_cli("store", "alerts", "--store", str(db)).stdout
    everything = run_cli("store", "alerts", "--all", "--store", str(db)).stdout
    assert f"INCIDENT {incident.fingerprint} resolved: accepted " in everything and "closed ack " in everything
    again = run_cli("store", "resolve", incident.fingerprint, "--store", str(db))
    assert again.returncode == 0 and "(0 open alert(s))" in again.stdout  # resolved once: nothing changes
    bad = run_cli("store", "ack", "0123456789abcdef0123", "--store", str(db))
    assert bad.returncode == 2 and "no incident or alert '0123456789abcdef0123'" in bad.stderr


def test_a_slowdown_that_goes_away_is_resolved_recovered_after_k_nights(tmp_path) -> None:
    rng = random.Random(3)
    with open_store(f"sqlite:///{tmp_path / 'r.db'}") as store:
        reviews = record_slowdown(store, range(1, 21), lambda n: 7 <= n <= 13, rng)
        rows = store.alert_rows()
    said = [(n, line.split()[0]) for n, r in enumerate(reviews, start=1) for line in r.transitions()]
    # Back on night 14: K = 3 nights at the old level. Six nights before it, the change was raised as a level change
    # (too few nights before it for a slide test) and renamed step once eight nights after it told.
    assert said == [(10, "INCIDENT"), (14, "RENAMED"), (16, "RESOLVED")], said
    assert "level-change -> step" in reviews[13].transitions()[0]
    # and it names the build of the night that resolved it (no upstream issue linked: nothing more)
    assert "RESOLVED incident" in reviews[15].transitions()[0]
    assert reviews[15].transitions()[0].endswith(": recovered on sim:post-fix (night-16)")
    assert {(r["state"], r["resolution"], r["closed_at"]) for r in rows if r["state"] != "transient"} == {
        ("resolved", "recovered", "night-16")}
    # The HUD export marks every night the incident was open, first bad night to the night it closed on,
    # on every record (case, metric) of its alerts, and no night before or after.
    out = tmp_path / "hud.json"
    with open_store(f"sqlite:///{tmp_path / 'r.db'}") as store:
        export_store(store, "hud", out)
    records = json.loads(out.read_text())
    alerted = {(r["case_name"], r["metric"]) for r in rows if r["state"] != "transient"}
    marked: dict[tuple[str, str], list[str]] = {}
    for rec in records:
        info = rec["metric"]["extra_info"]
        if "incident" in info:
            assert info["incident_state"] == "resolved: recovered" and all(isinstance(v, str) for v in info.values())
            marked.setdefault((rec["benchmark"]["extra_info"]["case"], rec["metric"]["name"]), []).append(
                rec["benchmark"]["extra_info"]["batch"])
    assert set(marked) == alerted and len(alerted) >= 3
    assert all(sorted(n) == [f"night-{i:02d}" for i in range(7, 17)] for n in marked.values()), marked


def test_a_later_change_in_the_same_series_supersedes_the_open_incident(tmp_path) -> None:
    rng = random.Random(3)
    with open_store(f"sqlite:///{tmp_path / 'r.db'}") as store:
        reviews = record_slowdown(store, range(1, 22), lambda n: n >= 7, rng,
                                  speed=lambda n: 1.0 if n < 7 else 0.75 if n < 14 else 0.5)
        rows = [r for r in store.alert_rows() if r["state"] != "transient"]
    said = [(n, line.split()[0]) for n, r in enumerate(reviews, start=1) for line in r.transitions()]
    opened = [n for n, what in said if what == "INCIDENT"]
    assert len(opened) == 2 and said.count((opened[1], "RESOLVED")) == 1, said  # the second one closes the first
    (first,) = reviews[opened[0] - 1].incidents
    closed = [r for r in rows if r["incident"] == first.fingerprint]
    assert closed and {(r["state"], r["resolution"]) for r in closed} == {("resolved", "superseded")}


def test_an_excursion_that_comes_back_within_k_nights_is_transient_and_reaches_no_one(tmp_path) -> None:
    rng = random.Random(3)
    with open_store(f"sqlite:///{tmp_path / 'r.db'}") as store:
        reviews = record_slowdown(store, range(1, 16), lambda n: n in (9, 10), rng)
        rows = store.alert_rows()
    assert [r.transitions() for r in reviews] == [[]] * 15  # nothing said on any night
    assert rows and {r["state"] for r in rows} == {"transient"}
    assert sum(r.transients for r in reviews) == len(rows)
    # Seen the night the series came back (night 11), on every case; a lone noisy night may add one elsewhere.
    assert reviews[10].transients >= len(rows) - 1 and {r["case_name"] for r in rows} == set(CASES)


def test_a_transient_is_judged_against_the_level_since_the_newest_change(tmp_path) -> None:
    """The drift of tests.series.nights, raised as a level change at night 36 (night 41): on night 45 the level
    over the 30 nights before its night 44 (mostly before the slide) made night 44, on the slide, look like a
    one-night excursion that came back. Judged against the level since the change, it is not one."""
    values = [float(np.median(t)) for t in drift_levels(48)]
    assert transient_at_end(values[:45], Rule(0.02)) is not None  # judged across the change, as before
    assert transient_at_end(values[:45], Rule(0.02), since=35) is None
    with open_store(f"sqlite:///{tmp_path / 'r.db'}") as store:
        reviews = record_drift(store)
        rows = store.alert_rows()
    assert [r["kind"] for r in rows] == ["drift"] and sum(r.transients for r in reviews) == 0


@pytest.mark.slow
def test_the_incidents_next_step_runs_as_printed(run_cli, tmp_path) -> None:
    """A slowdown of one build on a real scenario's two cases: one incident, and its printed next step (a
    compare of two reference-server specs) runs: the CLI accepts it, the case resolves, both builds start."""
    import dataclasses
    import shlex

    from harness.records.run_record import ScenarioRef

    ref = ScenarioRef("frozen-kv-mtp-accept-length-guard", "scenarios/frozen_kv_mtp/accept_length_guard.yaml")
    rng = random.Random(5)
    incidents: list[Incident] = []
    with open_store(f"sqlite:///{tmp_path / 'r.db'}") as store:
        for night in range(1, 14):
            batch = new_batch("nightly", f"night-{night:02d}", started_at=f"2026-11-{night:02d}T02:00:00+00:00")
            slow = night >= 7
            spec, factor = ("sim:post-fix,step-cost-ms=20", 0.75) if slow else ("sim:post-fix", 1.0)
            records = [dataclasses.replace(make_record(
                run_id=f"n{night}-{case}-t{t}", case=case, spec=spec, trial=t, started_at=batch.started_at,
                metrics={"output_throughput_tok_s": 200.0 * factor * (1 + 0.02 * rng.gauss(0, 1)),
                         "itl_ms_p50": 20.0 / factor * (1 + 0.02 * rng.gauss(0, 1))}), scenario=ref)
                for case in ("draft=topk1", "draft=topk3") for t in range(3)]
            store.record_many(records, batch)
            incidents += review(store, batch.id).incidents
    (incident,) = incidents
    assert {a.case for a in incident.alerts} == {"draft=topk1", "draft=topk3"}
    argv = shlex.split(incident.next_step)
    assert argv[:3] == ["sglang-repro", "compare", ref.file]
    proc = run_cli(*argv[1:], "--trials", "1", "--out", str(tmp_path / "out"), "--no-store", timeout=600)
    # 0 or 1: the scenario's expectations held or not; never 2 (the command as printed was bad) or 3 (infra).
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "pass -> pass" in proc.stdout  # both builds started and served (the outcome column: before -> after)
    (report,) = (tmp_path / "out" / "compare").glob("*/report.html")
    assert "sim:post-fix,step-cost-ms=20" in report.read_text()  # the after build is the slow one, as printed


# Raised as a level change and renamed drift; seed 4 since issue 47's third round raised drift at once (a ramp fits its
# throughput better than a step under the sharper noise reading, so the step rule leaves it to the drift rule: night
# 33, where it was a level change on night 24, renamed on 28).
@pytest.mark.parametrize(("seed", "messages"), [(3, ["INCIDENT", "RENAMED"]), (4, ["INCIDENT"]),
                                                (5, ["INCIDENT", "RENAMED"])])
def test_a_slide_seen_by_several_metrics_nights_apart_is_one_incident(tmp_path, seed: int, messages: list[str]) -> None:
    # Each metric dates the slide's start on its own (the real-noise benchmark saw ITL raised on night 23 and
    # throughput on night 30, as two incidents): the later metric joins the open slide, raising nothing.
    with open_store(f"sqlite:///{tmp_path / 'r.db'}") as store:
        reviews = record_speed_slide(store, 40, 15, random.Random(seed))
        rows = [r for r in store.alert_rows() if r["state"] != "transient"]
    said = [(n, line.split()[0]) for n, r in enumerate(reviews, start=1) for line in r.transitions()]
    assert [what for _, what in said] == messages, said
    assert len({r["metric"] for r in rows}) >= 2 and len({r["incident"] or r["fingerprint"] for r in rows}) == 1, rows
    assert {r["kind"] for r in rows} == {"drift"}
