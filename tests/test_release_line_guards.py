"""The release line read with its guards (issue 46): the eight places an independent reading of the real wheels
disagreed with ``releases`` / ``contract``, each checked against the wheels themselves (case 6, ``list --build``
and ``--set``, and the knob's docs: tests/test_list_build.py; a second reading of every field:
tests/test_profile_second_reading.py).

Every wheel is fetched ``--no-deps`` once into the cache (``.ci/run``), read unzipped, never installed.
"""

from __future__ import annotations

import ast
import dataclasses
import logging
from pathlib import Path

import pytest

from harness.contract.check import check_sources
from harness.contract.facts import FACTS, Fact
from harness.contract.release_line import ReleaseRow, release_row
from tests.helpers import release_wheel

ROOT = Path(__file__).resolve().parent.parent
TRT = "srt/layers/attention/trtllm_mha_backend.py"
HOOK = "srt/arg_groups/kv_cache_hook.py"


def _row(version: str) -> ReleaseRow:
    release_wheel(version)
    return release_row(version)


def _line_of(version: str, path: str, text: str) -> int:
    lines = (release_wheel(version).text(path) or "").splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


# -- 1. the SWA refill: present from 0.5.19, but only where the KV index translator translates ----------------

@pytest.mark.parametrize(("version", "guard", "copy", "refused"), [
    ("0.5.19", 904, 931, "224-229"), ("0.5.21", 1084, 1111, "545-550"), ("0.5.23", 1142, 1171, "588-600")])
def test_the_swa_refill_from_0_5_19_is_present_but_unreachable_for_frozen_kv_mtp(
        version: str, guard: int, copy: int, refused: str) -> None:
    profile = _row(version).profile
    assert profile is not None and profile.swa_refill == "present-but-unreachable"
    reach = profile.reach("swa_refill")
    assert reach is not None and reach.reachable is False and reach.line == f"{TRT}:{copy}"
    (blocking,) = [g for g in reach.guards if g.holds is False]
    assert blocking.test == "self.kv_index_translator.is_translating" and blocking.where == f"{TRT}:{guard}"
    links = "\n".join(blocking.why)
    assert f"{HOOK}:{refused}" in links and "srt/mem_cache/kv_index_translator.py:" in links and "FROZEN_KV_MTP" in links


def test_the_swa_refill_of_0_5_14_is_reachable_and_unguarded() -> None:
    profile = _row("0.5.14").profile
    assert profile is not None and profile.swa_refill == "unguarded"
    reach = profile.reach("swa_refill")
    assert reach is not None and reach.reachable is not False and reach.line == f"{TRT}:645"
    assert [g.where for g in reach.guards] == [f"{TRT}:642"]  # use_sliding_window_kv_pool and a live out_cache_loc


def test_docs_and_the_reference_server_follow_the_corrected_refill() -> None:
    from harness.sim.release_rules import rules_for

    doc = (ROOT / "docs/releases.md").read_text()
    assert "would crash there again" not in doc
    for version in ("0.5.19", "0.5.21", "0.5.23"):
        profile = _row(version).profile
        assert profile is not None and rules_for(version).swa_refill == profile.swa_refill


# -- the claim re-checked where it leads: a stale draft out_cache_loc on 0.5.19+'s graph path -------------------

def _nodes_in(version: str, path: str, function: str) -> list[ast.AST]:
    tree = ast.parse(release_wheel(version).text(path) or "")
    funcs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function]
    assert funcs, (version, path, function)
    return [n for f in funcs for n in ast.walk(f)]


@pytest.mark.parametrize("version", ["0.5.15", "0.5.19", "0.5.21", "0.5.23"])
def test_the_graph_replay_never_hands_a_stale_out_cache_loc_to_the_fused_kernel(version: str) -> None:
    """Read here with ast, apart from the contract: the capture batch carries out_cache_loc=None, the in-graph
    metadata call is recorded inside the capture, and execute() never touches out_cache_loc."""
    runner = "srt/speculative/frozen_kv_mtp_cuda_graph_runner.py"
    capture = _nodes_in(version, runner, "capture_one_shape")
    batch = [k for n in capture if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "ForwardBatch"
             for k in n.keywords if k.arg == "out_cache_loc"]
    assert batch and all(isinstance(k.value, ast.Constant) and k.value.value is None for k in batch)
    assert any(isinstance(n, ast.Attribute) and n.attr == "init_forward_metadata_in_graph" for n in capture)
    execute = _nodes_in(version, runner, "execute")
    assert not any(isinstance(n, ast.Attribute) and n.attr == "out_cache_loc" for n in execute)
    row = _row(version)
    fused = [loc for loc in row.located if loc.fact == "DRAFT_GRAPH_FUSED_SWA_LOC"]
    assert fused and {loc.status for loc in fused} <= {"holds", "moved"}, [loc.describe() for loc in fused]


def test_the_29021_scenario_predicts_each_release_from_its_guards() -> None:
    from harness.bisect.release_plan import expect_per_release, expectation
    from harness.scenario import load_file

    (case,) = load_file(ROOT / "scenarios/frozen_kv_mtp/trtllm_swa_nvfp4_graph_draft.yaml").cases
    versions = ("0.5.14", "0.5.15", "0.5.19", "0.5.21", "0.5.23")
    got = {e.version: e for e in expect_per_release(case, versions, "pip:sglang=={version}")}
    assert got["0.5.14"].expect == "crash only with trtllm_mha and a hybrid SWA pool"
    assert all(got[v].expect == "pass" for v in versions[1:])
    for version in versions[2:]:
        assert "present-but-unreachable" in got[version].why and "kv_cache_hook.py" in got[version].why
    # whatever the fix: a 0.5.23 that lost PR #29616's line still has no graph-path refill to crash in
    profile = _row("0.5.23").profile
    assert profile is not None
    regressed = dataclasses.replace(profile, fix_present=False)
    assert expectation(regressed, case.scenario.server.args)[0] == "pass"
    old = _row("0.5.14").profile
    assert old is not None and expectation(old, case.scenario.server.args)[0].startswith("crash")


# -- 2. the running-request default of 0.5.12.x, set in ServerArgs._handle_speculative_decoding ---------------

def test_the_0_5_12_running_request_default_is_read_where_it_is_set() -> None:
    profile = _row("0.5.12.post1").profile
    assert profile is not None and profile.max_running_default == 48
    line = _line_of("0.5.12.post1", "srt/server_args.py", 'if self.speculative_algorithm == "FROZEN_KV_MTP":')
    assert dict(profile.evidence)["max_running_default"] == f"srt/server_args.py:{line + 2}"
    reach = profile.reach("max_running_default")
    assert reach is not None and f"srt/server_args.py:{line}" in [g.where for g in reach.guards]


# -- 3. a deprecated flag's replacement, read from the call's keyword whatever its layout ----------------------

@pytest.mark.parametrize(("version", "flag", "new"), [
    ("0.5.14", "--cuda-graph-bs", "--cuda-graph-bs-decode"), ("0.5.15", "--cuda-graph-bs", "--cuda-graph-bs-decode"),
    ("0.5.17", "--cuda-graph-bs", "--cuda-graph-bs-decode"), ("0.5.19", "--cuda-graph-bs", "--cuda-graph-bs-decode"),
    ("0.5.23", "--monokernel-backend", "--enable-amd-monokernel")])
def test_a_replacement_is_read_from_new_flag_however_far_below_the_flag(version: str, flag: str, new: str) -> None:
    profile = _row(version).profile
    assert profile is not None
    dep = profile.replacement(flag)
    assert dep is not None and dep.replacement == new
    assert dep.where == f"srt/server_args.py:{_line_of(version, 'srt/server_args.py', repr(flag).replace(chr(39), chr(34)))}"


# -- 4. a fact recorded absent prints no line; a fact that changed file keeps its own line and function --------

def test_a_fact_recorded_absent_names_no_line() -> None:
    for version, fact, text in (("0.5.23", "SPEC_HISTOGRAM_KEYS", 'meta_info["spec_accept_histogram"]'),
                                ("0.5.13.post1", "SIGTERM_SCHEDULER_WAIT_S", "send_pyobj(ShutdownReq())"),
                                ("0.5.13.post1", "SIGTERM_SCHEDULER_WAIT_S", "deadline = time.monotonic() + 15")):
        located = [loc for loc in _row(version).located if loc.fact == fact and text in loc.text]
        assert located and all(loc.status == "holds" for loc in located)
        for loc in located:
            assert loc.cited is None and loc.function is None, loc
            said = loc.describe()
            assert "recorded absent" in said and ".py:" not in said, said


def test_a_fact_that_changed_file_pairs_each_line_with_its_own_file() -> None:
    (loc,) = [loc for loc in _row("0.5.23").located if loc.fact == "AVG_ACCEPT_LENGTH_KEY"
              and "avg_spec_accept_length" in loc.text]
    said = loc.describe()
    istate = _line_of("0.5.23", "srt/managers/scheduler_components/internal_state.py", loc.text)
    assert "sglang/srt/managers/scheduler.py:3775 in Scheduler.get_internal_state" in said, said
    assert f"sglang/srt/managers/scheduler_components/internal_state.py:{istate}" in said, said
    assert "internal_state.py:3775" not in said


# -- 5. before 0.5.14 the draft worker is frozen_kv_mtp_worker.py: every profile fact is located there ---------

def test_the_older_worker_file_is_located_for_every_profile_fact() -> None:
    old = "srt/speculative/frozen_kv_mtp_worker.py"
    row = _row("0.5.13.post1")
    by_fact: dict[str, list] = {}
    for loc in row.located:
        by_fact.setdefault(loc.fact, []).append(loc)
    for fact in ("DRAFT_TOPK_BACKEND", "DRAFT_GRAPH_PATH", "DRAFT_EAGER_CHOICE", "FROZEN_KV_MTP_MAX_RUNNING_DEFAULT"):
        assert all(loc.status != "gone" for loc in by_fact[fact]), [loc.describe() for loc in by_fact[fact]]
    found = {(loc.file, n) for locs in by_fact.values() for loc in locs for n in loc.found}
    for n in (211, 315, 319, 322):
        assert (old, n) in found, n
    assert ("srt/arg_groups/speculative_hook.py", 252) in found
    for item in FACTS:  # no citation of the v2 file is left looking in it where the worker is the older file
        for cite in item.cites:
            if cite.file.endswith("frozen_kv_mtp_worker_v2.py") and cite.line("0.5.14") is not None:
                one = Fact(item.name, item.value, (cite,))
                (loc,) = check_sources(release_wheel("0.5.13.post1"), "0.5.13.post1", None, [one])
                assert loc.file == old, loc


# -- 7. the reference server's log names the release it was asked for (the knob's docs: tests/test_list_build.py) --

def test_the_reference_server_names_the_release_it_was_asked_for(caplog: pytest.LogCaptureFixture) -> None:
    from tests.sim.test_sim_mechanism import NVFP4, _scheduler

    release_wheel("0.5.14")
    with caplog.at_level(logging.INFO):
        _scheduler([*NVFP4, "--speculative-num-steps", "1", "--speculative-num-draft-tokens", "2",
                    "--sim-rules", "0.5.14"])
    said = [r.getMessage() for r in caplog.records if "draft CUDA graph skipped" in r.getMessage()]
    assert said and "0.5.14's rule" in said[0] and "0.5.13's" not in said[0], said
