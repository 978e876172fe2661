"""Stateful workloads: the phase format and its one-line errors, per-phase figures, and the checks across phases."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from harness.measure.acceptance import accept_by_position, accept_trend, cache_figures, cache_state, request_histogram
from harness.records.request_log import RequestRecord
from harness.scenario import Case, ScenarioError, load_file
from harness.series.points import rule_for
from harness.util.errors import HarnessError
from harness.workload.phases import (
    _groups,
    evaluate_phase_checks,
    phase_figures,
    phase_metric,
    phase_plans,
    refuse_flush,
    split_phase_metric,
)
from harness.workload.prompts import Prompt

# A claim about the harness, not the model: its reference servers are the torch-free stand-in (tests/conftest.py).
pytestmark = pytest.mark.standin

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "scenarios" / "cache_state" / "hicache_loadback_draft_state.yaml"

STATEFUL = textwrap.dedent(
    """\
    name: tiny-stateful
    description: a baseline, pressure, and the baseline again
    server:
      model: google/gemma-4-E4B-it
      draft_model: google/gemma-4-E4B-it-assistant
      args: {speculative-algorithm: NEXTN, enable-hierarchical-cache: true}
    workload:
      requests: 3
      prompt: {tokens: 8, seed: 5}
      max_new_tokens: 4
      phases:
        - name: baseline
        - name: pressure
          requests: 2
          prompt: {tokens: 30, seed: 9}
          max_new_tokens: 1
        - name: after
          replay: baseline
    checks:
      phases:
        after: {cache_hit_rate: {min: 0.5}, accept_rate_by_position: [{min: 0.4}, null]}
      across_phases:
        - {metric: accept_length, phase: after, baseline: baseline, min_ratio: 0.9}
    builds:
      before: {spec: "pip:sglang==0.5.15", sim: "post-fix,draft-cache=pre-fix"}
      after: {spec: "pip:sglang==0.5.23", sim: "post-fix,draft-cache=post-fix"}
    expect:
      before: {outcome: fail}
      after: {outcome: pass}
    """
)


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(text)
    return p


def _errors(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        load_file(_write(tmp_path, text))
    return info.value.lines


def test_the_seed_scenario_is_stateful_with_the_issue_s_phases_and_flags() -> None:
    (case,) = load_file(SEED).cases
    sc = case.scenario
    assert sc.stateful and sc.workload.phase_names == ("baseline", "pressure", "after")
    assert sc.server.args["enable-hierarchical-cache"] is True and sc.server.args["hicache-ratio"] == 3
    assert sc.checks.across_phases[0].phase == "after" and sc.checks.across_phases[0].min_ratio == 0.9
    sim = sc.builds["before"].sim
    assert sim is not None and sim.endswith("draft-cache=pre-fix")
    assert "https://github.com/sgl-project/sglang/issues/32176" in sc.upstream.issues
    # The pressure phase overflows the device KV pool the flags size: what makes HiCache evict.
    pressure = sc.workload.phases[1]  # type: ignore[index]
    assert pressure.prompt is not None and pressure.requests is not None
    pool = sc.server.args["max-total-tokens"]
    assert isinstance(pool, int) and pressure.requests * pressure.prompt.lengths()[0] > pool


@pytest.mark.parametrize(("old", "new", "wanted"), [
    ("    - name: after\n      replay: baseline\n", "    - name: after\n      replay: later\n",
     "replay 'later' names no earlier phase"),
    ("    - name: pressure\n", "    - name: baseline\n", "phase name 'baseline' is used twice"),
    ("      replay: baseline\n", "      replay: baseline\n      requests: 4\n", "give neither prompt nor requests"),
    ("phase: after, baseline: baseline", "phase: later, baseline: baseline", "no workload phase 'later'"),
    ("  phases:\n    after:", "  phases:\n    nowhere:", "no workload phase 'nowhere'"),
    ("  args: {", "  share_between_trials: true\n  args: {", "never shares a server between trials"),
    ("      replay: baseline\n", "      replay: baseline\n      joins: baseline\n",
     "joins 'baseline' must name the phase just before it (pressure)"),
    ("    - name: baseline\n", "    - name: baseline\n      joins: pressure\n", "(none: it is the first)"),
])
def test_bad_phases_are_one_line_errors_naming_file_line_and_field(tmp_path: Path, old: str, new: str,
                                                                  wanted: str) -> None:
    assert old in STATEFUL
    lines = _errors(tmp_path, STATEFUL.replace(old, new, 1))
    assert len(lines) == 1 and wanted in lines[0], lines
    assert lines[0].startswith(f"{tmp_path / 's.yaml'}:"), lines  # FILE:LINE:COL first


def test_a_joining_phase_needs_a_stream_and_runs_beside_the_one_it_joins(tmp_path: Path) -> None:
    joining = STATEFUL.replace("      replay: baseline\n", "      replay: baseline\n      joins: pressure\n")
    (case,) = load_file(_write(tmp_path, joining)).cases
    plans = phase_plans(case, lambda c, t: [Prompt(input_ids=(1,), text=None, tokens=1)] * c.scenario.workload.requests, 0)
    assert [p.joins for p in plans] == [None, None, "pressure"]
    assert [[p.name for p in g] for g in _groups(plans)] == [["baseline"], ["pressure", "after"]]
    lines = _errors(tmp_path, joining.replace("  max_new_tokens: 4\n", "  max_new_tokens: 4\n  stream: false\n", 1))
    assert len(lines) == 1 and "joins waits for the first streamed token" in lines[0], lines


def test_phase_plans_replay_the_earlier_phase_s_prompts(tmp_path: Path) -> None:
    (case,) = load_file(_write(tmp_path, STATEFUL)).cases

    def prompts(c: Case, trial: int) -> list[Prompt]:  # the launcher's role: seeded prompts of the (narrowed) workload
        wl = c.scenario.workload
        n = wl.prompt.lengths()[0]
        return [Prompt(tuple(range(wl.prompt.seed + i, wl.prompt.seed + i + n)), None, n)
                for i in range(wl.warmup + wl.requests)]

    plans = {p.name: p for p in phase_plans(case, prompts, 0)}
    assert [len(plans[n].prompts) for n in ("baseline", "pressure", "after")] == [3, 2, 3]
    assert plans["after"].prompts == plans["baseline"].prompts
    assert plans["pressure"].prompts[0].tokens == 30 and plans["pressure"].max_new_tokens == 1
    assert plans["baseline"].max_new_tokens == 4


def test_a_stateful_scenario_refuses_a_flush(tmp_path: Path) -> None:
    (case,) = load_file(_write(tmp_path, STATEFUL)).cases
    with pytest.raises(HarnessError, match="must not meet a flushed or shared server"):
        refuse_flush(case.scenario)
    head, _, _ = STATEFUL.partition("  phases:\n    - name: baseline")
    plain = head + STATEFUL[STATEFUL.index("builds:"):]
    (case,) = load_file(_write(tmp_path, plain)).cases
    refuse_flush(case.scenario)  # a plain scenario may share and flush


def _rec(i: int, done_ms: int, *, tokens: int, verify: int, hist: list[int] | None, cached: int = 0,
         host: int = 0, prompt: int = 100, key: str = "spec_correct_drafts_histogram") -> RequestRecord:
    meta: dict = {"completion_tokens": tokens, "prompt_tokens": prompt, "cached_tokens": cached,
                  "spec_verify_ct": verify, "spec_accept_length": tokens / verify,
                  "spec_num_proposed_drafts": 3 * verify, "spec_num_correct_drafts": tokens - verify}
    if hist is not None:
        meta[key] = hist
    if cached:
        meta["cached_tokens_details"] = {"device": cached - host, "host": host}
    return RequestRecord(index=i, warmup=False, prompt_tokens=prompt, stream=True, ok=True, status=200,
                         error_kind=None, error=None, due_ns=0, sent_ns=0, written_ns=None, headers_ns=1,
                         chunks=((1, tokens),), done_ns=done_ms * 1_000_000, closed_ns=done_ms * 1_000_000,
                         finish_reason={"type": "length"}, completion_tokens=tokens, meta_info=meta, text="",
                         started_at=0.0)


def test_acceptance_by_position_counts_steps_that_accepted_at_least_k_drafts() -> None:
    # 4 steps: 0, 1, 1 and 3 drafts accepted; 3 drafts proposed per step.
    a = _rec(0, 10, tokens=9, verify=4, hist=[1, 2, 0, 1])
    # The alias (0.5.14 and 0.5.15 send both), a histogram that never reached position 3: 2 steps, 0 and 2 accepted.
    b = _rec(1, 20, tokens=4, verify=2, hist=[1, 0, 1], key="spec_accept_histogram")
    rates = accept_by_position([a, b])
    assert rates == pytest.approx([4 / 6, 2 / 6, 1 / 6])
    assert request_histogram({"spec_accept_histogram": [1, True]}) is None  # a bool is not a count
    assert accept_by_position([_rec(2, 5, tokens=4, verify=2, hist=None)]) == []


def test_cache_state_and_hit_rate_come_from_cached_tokens() -> None:
    miss = _rec(0, 1, tokens=4, verify=2, hist=None)
    device = _rec(1, 2, tokens=4, verify=2, hist=None, cached=50)
    host = _rec(2, 3, tokens=4, verify=2, hist=None, cached=90, host=80)
    assert [cache_state(r.meta_info) for r in (miss, device, host)] == ["miss", "device", "host"]
    figures = cache_figures([miss, device, host])
    assert figures["cache_hit_rate"] == pytest.approx(140 / 300)
    assert figures["cache_host_rate"] == pytest.approx(80 / 300)
    out = phase_figures([miss, device, host])
    assert out["accept_length_host"] == pytest.approx(2.0) and out["accept_length_miss"] == pytest.approx(2.0)


def test_the_trend_test_calls_a_smooth_decline_and_not_noise() -> None:
    falling = [_rec(i, 10 * i, tokens=int(40 - 1.5 * i), verify=10, hist=None) for i in range(16)]
    trend = accept_trend(falling)
    assert trend is not None and trend.declining(0.01)
    # The same values in a scrambled order: no decline.
    order = [5, 12, 0, 9, 14, 3, 7, 1, 15, 10, 2, 8, 13, 4, 11, 6]
    scrambled = [_rec(i, 10 * k, tokens=int(40 - 1.5 * i), verify=10, hist=None) for k, i in enumerate(order)]
    noise = accept_trend(scrambled)
    assert noise is not None and not noise.declining(0.01)
    assert accept_trend(falling[:5]) is None  # too few to test


def test_cross_phase_and_per_phase_checks(tmp_path: Path) -> None:
    (case,) = load_file(_write(tmp_path, STATEFUL)).cases
    checks = case.scenario.checks
    good = {phase_metric("accept_length", "baseline"): 2.2, phase_metric("accept_length", "after"): 2.1,
            phase_metric("cache_hit_rate", "after"): 0.99, phase_metric("accept_rate_pos1", "after"): 0.5}
    assert all(c.held for c in evaluate_phase_checks(checks, good))
    bad = {**good, phase_metric("accept_length", "after"): 1.6, phase_metric("accept_rate_pos1", "after"): 0.3}
    failed = [c for c in evaluate_phase_checks(checks, bad) if not c.held]
    assert [c.check for c in failed] == ["after: draft position 1 acceptance rate within bounds",
                                         "after accept_length >= 0.9 x baseline"]
    assert "1.6 < 0.9 x baseline 2.2" in failed[1].detail
    missing = {k: v for k, v in good.items() if "baseline" not in k}
    (absent,) = [c for c in evaluate_phase_checks(checks, missing) if not c.held]
    assert "phase baseline was not measured" in absent.detail


def test_phase_metrics_are_series_with_their_figure_s_rule() -> None:
    assert split_phase_metric("accept_length@after") == ("accept_length", "after")
    assert split_phase_metric("accept_length") == ("accept_length", None)
    assert rule_for("accept_length@after") == rule_for("accept_length")
    assert rule_for("cache_hit_rate@after") is not None and rule_for("cache_hit_rate") is None
    assert rule_for("accept_length_q1@after") is None  # only the named figures alert


def test_the_trend_check_fails_a_significant_decline_only(tmp_path: Path) -> None:
    text = STATEFUL.replace("    after: {cache_hit_rate: {min: 0.5},",
                            "    after: {no_decline: 0.01, cache_hit_rate: {min: 0.5},")
    (case,) = load_file(_write(tmp_path, text)).cases
    base = {phase_metric("accept_length", "baseline"): 2.0, phase_metric("accept_length", "after"): 2.0,
            phase_metric("cache_hit_rate", "after"): 0.99, phase_metric("accept_rate_pos1", "after"): 0.5}

    def trend_check(tau: float | None, p: float | None) -> bool:
        metrics = {**base, phase_metric("accept_trend_tau", "after"): tau, phase_metric("accept_trend_p", "after"): p}
        (check,) = [c for c in evaluate_phase_checks(case.scenario.checks, metrics) if "decline" in c.check]
        return check.held

    assert not trend_check(-0.6, 0.001)
    assert trend_check(-0.2, 0.2) and trend_check(0.5, 0.999)
    assert not trend_check(None, None)  # unmeasured is not a pass
