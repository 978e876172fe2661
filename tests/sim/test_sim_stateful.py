"""The cache-state acceptance bug end to end on the reference server: run, compare, report, nightly.

The seed scenario (sglang#32176's shape), scaled down so each trial takes seconds: its before role
(``draft-cache=pre-fix``: HiCache's load-back leaves the draft's view stale) must fail the after-phase check
and its after role pass, ``compare`` must give a verdict per phase, the report must show the phases, and the
nightly series of ``accept_length@after`` must turn the night the buggy revision lands into one incident.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from harness.alerts.alert import Alert
from harness.compare.runner import compare_cases
from harness.dashboard.site import build_site
from harness.incidents.incident import Incident
from harness.incidents.review import review
from harness.records.outcome import Outcome
from harness.report import render_html, render_markdown
from harness.scenario import load_file
from harness.store.store import new_batch, open_store

pytestmark = [pytest.mark.slow, pytest.mark.sim]

SEED = Path(__file__).resolve().parents[2] / "scenarios" / "cache_state" / "hicache_loadback_draft_state.yaml"
# Same flags and phases; a smaller KV pool, so that a lighter pressure phase still overflows it, and a
# lighter baseline (3 requests of 16 new tokens instead of 6 of 32; the after phase replays it): the
# reference server's acceptance is deterministic for a seed, so the per-phase verdicts do not need the
# seed's sample sizes, only the eviction to the host tier and the load-back, which these sizes still make.
SCALE = (("max-total-tokens: 2048", "max-total-tokens: 1024"), ("      requests: 3\n", "      requests: 2\n"),
         ("        tokens: 900\n", "        tokens: 600\n"), ("\n  requests: 6\n", "\n  requests: 3\n"),
         ("\n  max_new_tokens: 32\n", "\n  max_new_tokens: 16\n"))


def _scaled(tmp_path: Path) -> Path:
    text = SEED.read_text()
    for old, new in SCALE:
        assert old in text, old
        text = text.replace(old, new, 1)
    path = tmp_path / "hicache.yaml"
    path.write_text(text)
    return path


def test_the_load_back_bug_fails_before_passes_after_per_phase_and_is_one_nightly_incident(tmp_path: Path) -> None:
    loaded = load_file(_scaled(tmp_path))
    (case,) = loaded.cases
    specs = {role: b.sim_spec for role, b in case.scenario.builds.items()}
    result = compare_cases(loaded, loaded.cases, specs, out_root=tmp_path)  # 5 trials a side
    by_role = {role: [r for r in result.runs if r.build.role == role] for role in specs}

    # run: the before role fails exactly the cross-phase check, on a phase that really hit the host tier.
    for record in by_role["before"]:
        assert record.outcome is Outcome.FAIL, record.reason
        failed = [c.check for c in record.checks if not c.held]
        assert failed == ["after accept_length >= 0.9 x baseline"], record.reason
        m = record.metrics
        assert (m["cache_hit_rate@after"] or 0) > 0.9 and (m["cache_host_rate@after"] or 0) > 0.9
        assert m["cache_hit_rate@baseline"] == 0.0
    for record in by_role["after"]:
        assert record.outcome is Outcome.PASS, record.reason
        after, baseline = record.metrics["accept_length@after"], record.metrics["accept_length@baseline"]
        assert after is not None and baseline is not None and after >= 0.9 * baseline
    # The phases ran on one server: one start per trial, its log one file, the phases' requests kept apart.
    run_dir = Path(by_role["before"][0].artifacts)
    assert {p.name for p in run_dir.glob("requests.*.jsonl")} == {
        "requests.baseline.jsonl", "requests.pressure.jsonl", "requests.after.jsonl"}

    # compare: a verdict per phase. The first role is the baseline, so the fixed build is better on the after
    # phase and the same on the baseline phase, which no load-back touched.
    (cmp,) = result.report.cases
    verdicts = {m.metric: m.verdict for m in cmp.metrics}
    assert verdicts["accept_length@after"] == "better" and verdicts["accept_rate@after"] == "better"
    assert verdicts["accept_length@baseline"] == "same" and verdicts["cache_hit_rate@after"] == "same"
    # and a verdict per draft position: the stale draft view costs the first draft token already.
    assert verdicts["accept_rate_pos1@after"] == "better" and "accept_rate_pos1@baseline" in verdicts
    assert cmp.expectations_held

    # report: acceptance per phase, by draft position and over time.
    md, html = render_markdown(result.report), render_html(result.report)
    assert "Workload phases" in md and "By draft position" in md and "Over time" in md
    assert "Acceptance length (measured requests), phase after" in md
    assert "<h3>Workload phases</h3>" in html

    # nightly: six nights of the fixed revision, then the buggy one lands: one incident, first bad night 7, and
    # the series of the after phase's acceptance length steps down there (the baseline phase's does not move).
    incidents: list[Incident] = []
    alerts: list[Alert] = []
    with open_store(f"sqlite:///{tmp_path / 'nightly.db'}") as store:
        for night in range(1, 13):
            role = "after" if night <= 6 else "before"
            batch = new_batch("nightly", f"night-{night:02d}", started_at=f"2026-11-{night:02d}T02:00:00+00:00")
            store.record_many([dataclasses.replace(r, run_id=f"n{night}-{r.run_id}", started_at=batch.started_at)
                               for r in by_role[role]], batch)
            rv = review(store, batch.id)
            incidents += rv.incidents
            alerts += rv.new
    assert len(incidents) == 1, [i.describe() for i in incidents]
    assert incidents[0].lead.first_bad.batch_label == "night-07"
    # The after phase's acceptance length falls far (well past the large band, 10% for acceptance length) on both
    # nights 7 and 8, so the large-change rule (7edb3cb, issue 47) raises it on night 8 as a ``large-change``, before
    # the step rule could (it needs more nights after the change); first bad is still night 7.
    steps = {a.metric: a for a in alerts if a.kind in ("step", "level-change", "large-change")}
    assert "accept_length@after" in steps and "accept_length@baseline" not in steps, [(a.metric, a.kind) for a in alerts]
    assert steps["accept_length@after"].kind == "large-change"
    assert steps["accept_length@after"].first_bad.batch_label == "night-07"
    assert (steps["accept_length@after"].effect or 0) < -0.1

    # dashboard: the case's page shows the last nights' phases, acceptance by draft position among them, and
    # the buggy nights' after phase below their baseline phase there too.
    with open_store(f"sqlite:///{tmp_path / 'nightly.db'}") as store:
        build_site(store, tmp_path / "site")
    (page,) = (tmp_path / "site").glob("scenario-*.html")
    text = page.read_text()
    assert "Workload phases, last nights" in text and "By draft position 1..k" in text
    night_rows = re.findall(r"<tr><td>[^<]*\(night-(\d+)\)</td><td>(\w+)</td><td>([\d.]+)</td>", text)
    shown = {(int(n), phase): float(v) for n, phase, v in night_rows}
    assert {n for n, _ in shown} == {10, 11, 12}
    assert all(shown[(n, "after")] < 0.9 * shown[(n, "baseline")] for n in (10, 11, 12)), shown
