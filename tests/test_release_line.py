"""The release line, checked against the real wheels (fetched --no-deps once into the cache, by .ci/run or here).

Every claim below is read from the wheels themselves (harness.contract.wheels): the contract's status per fact
and release, the build profiles, the reference server's release rules, and pre-flight on 0.5.13.post1.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from harness.contract.check import DRIFT, check_sources, contract_counts, fact_statuses
from harness.contract.facts import FACTS, NEVER_GATES, needs
from harness.contract.profile import compute_profile
from harness.contract.release_line import release_row
from harness.contract.wheels import WheelSources
from tests.helpers import release_wheel

ROOT = Path(__file__).resolve().parent.parent
# The releases the issue names: both sides of the fix, the reporter's (0.5.13.x), a post release, the newest seen.
LINE = ("0.5.12.post1", "0.5.13.post1", "0.5.14", "0.5.15", "0.5.15.post1", "0.5.23")
BY_NAME = {f.name: f for f in FACTS}


@pytest.fixture(scope="module")
def rows() -> dict[str, object]:
    return {v: (release_wheel(v), release_row(v))[1] for v in LINE}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, check=False)


def test_the_cited_releases_hold_every_fact_and_a_post_release_moves_some(rows: dict) -> None:
    for version in ("0.5.14", "0.5.15"):
        assert contract_counts(rows[version].located) == {"holds": len(FACTS), "moved": 0, "changed": 0, "gone": 0}
    post = rows["0.5.15.post1"]
    counts = contract_counts(post.located)
    assert counts["changed"] == counts["gone"] == 0 and counts["moved"] > 0, counts
    sources = release_wheel("0.5.15.post1")
    for loc in post.located:  # "moved" says where the text is now, in that wheel
        if loc.status == "moved":
            lines = (sources.text(loc.file) or "").splitlines()
            assert all(loc.text in lines[n - 1] for n in loc.found), loc


def test_a_changed_citation_names_its_function_and_what_it_says_now(rows: dict) -> None:
    changed = [loc for loc in rows["0.5.12.post1"].located if loc.status == "changed"]
    assert changed
    sources = release_wheel("0.5.12.post1")
    for loc in changed:
        if loc.function:
            assert loc.function.split(".")[-1] in (sources.text(loc.file) or ""), loc
            assert loc.function in loc.now


def test_contract_over_the_line_prints_a_status_per_fact() -> None:
    done = _cli("contract", "--all", *LINE)
    # every read-through fact holds or moved on the whole line, the oldest and newest releases included (their
    # wordings are recorded, facts.Later / facts.Earlier); only what a build is, and teardown, may differ
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    for version in LINE:
        lines = [line for line in done.stdout.splitlines() if line.startswith(version + " ")]
        assert {line.split()[2] for line in lines} <= {"holds", "moved", "changed", "gone"}
        assert {line.split()[1].rstrip(":") for line in lines} == set(BY_NAME)
    assert f"sglang 0.5.14: {len(FACTS)} holds of {len(FACTS)} facts; 0 read-through fact(s) changed or gone" in done.stdout
    for version in LINE:
        assert f"sglang {version}: " in done.stdout and "0 read-through fact(s) changed or gone" in next(
            line for line in done.stdout.splitlines() if line.startswith(f"sglang {version}: ")), version


def test_the_reporters_release_gates_no_run_on_what_the_bug_is(rows: dict) -> None:
    """0.5.13.post1 (where sglang#28264's traceback is from, line for line) lacks nothing the harness reads
    through: its differences are profile facts (the fix, the draft path), never a gate."""
    statuses = fact_statuses(rows["0.5.13.post1"].located)
    gating = {n: s for n, s in statuses.items() if s in DRIFT and needs(BY_NAME[n]) not in NEVER_GATES}
    assert gating == {}
    assert {"FIX_MARKER", "DRAFT_EAGER_CHOICE"} <= {n for n, s in statuses.items() if s != "holds"}


def test_28264s_traceback_is_0_5_13_x_line_for_line() -> None:
    frames = [("speculative/frozen_kv_mtp_worker.py", 676, "seed_output = self.draft_model_runner.forward("),
              ("model_executor/model_runner.py", 3454, "output = self._forward_raw("),
              ("model_executor/model_runner.py", 3573, "ret = self.forward_decode("),
              ("model_executor/model_runner.py", 3208, "forward_batch = self._eager_fb_view("),
              ("model_executor/model_runner.py", 3188, "registry.fill_from("),
              ("model_executor/cuda_graph_buffer_registry.py", 448, "_grouped_foreach_copy_(gpu_dsts, gpu_srcs)")]
    for version in ("0.5.13.post1", "0.5.14"):
        sources = release_wheel(version)
        held = [text in ((sources.text("srt/" + f) or "").splitlines() + [""] * line)[line - 1]
                for f, line, text in frames]
        assert all(held) == (version == "0.5.13.post1"), (version, held)
    log = (ROOT / "fixtures/tracebacks/upstream-28264-issue.log").read_text()
    assert all(f'{f}", line {line},' in log for f, line, _ in frames)


def test_profiles_along_the_line(rows: dict) -> None:
    fix = {v: rows[v].profile.fix_present for v in LINE}
    assert fix == {"0.5.12.post1": False, "0.5.13.post1": False, "0.5.14": False, "0.5.15": True,
                   "0.5.15.post1": True, "0.5.23": True}
    assert [rows[v].profile.eager_max_steps for v in LINE] == [1, 1, 1, 1, 1, 0]
    assert rows["0.5.23"].profile.eager(1, graphs_disabled=False) is False
    assert rows["0.5.15"].profile.eager(1, graphs_disabled=False) is True
    assert "--speculative-num-steps <= 0" in rows["0.5.23"].profile.eager_rule
    assert rows["0.5.23"].profile.topk_backends == ("triton", "trtllm_mha")
    assert rows["0.5.14"].profile.swa_refill == "unguarded" and rows["0.5.15"].profile.swa_refill == "none"
    # back from 0.5.19 inside `if self.kv_index_translator.is_translating:`, which a Frozen-KV MTP draft never has
    # (tests/test_release_line_guards.py traces the chain)
    assert rows["0.5.23"].profile.swa_refill == "present-but-unreachable"
    dep = rows["0.5.14"].profile.replacement("--disable-cuda-graph")
    assert dep is not None and dep.replacement == "--cuda-graph-backend-{decode,prefill}=disabled"
    assert rows["0.5.13.post1"].profile.replacement("--disable-cuda-graph") is None


def test_releases_json_says_where_the_fix_is_and_names_the_eager_change() -> None:
    done = _cli("releases", "--format", "json", "0.5.13.post1", "0.5.14", "0.5.15", "0.5.23")
    assert done.returncode == 0, done.stderr
    got = {r["version"]: r for r in json.loads(done.stdout)}
    assert {v: r["fix_present"] for v, r in got.items()} == {"0.5.13.post1": False, "0.5.14": False,
                                                            "0.5.15": True, "0.5.23": True}
    assert "<= 1" in got["0.5.15"]["eager_rule"] and "<= 0" in got["0.5.23"]["eager_rule"]
    assert set(got["0.5.14"]["contract"]) == {"holds", "moved", "changed", "gone"}
    assert _cli("releases", "not-a-version").returncode == 2


def test_the_reference_servers_rules_are_the_wheels(rows: dict) -> None:
    """harness.sim.release_rules is the reference server's own table (a model): each row against the real wheel."""
    from harness.sim.release_rules import rules_for

    for version in LINE:
        real, model = rows[version].profile, rules_for(version)
        assert (model.eager_max_steps, model.topk_backends, model.swa_refill) == \
            (real.eager_max_steps, real.topk_backends, real.swa_refill), version


def test_a_profile_is_read_from_the_wheel_alone(tmp_path: Path) -> None:
    """No install: the profile of a wheel whose draft worker lost its eager rule says why it has none."""
    from harness.contract.profile import ProfileUnavailable

    src = release_wheel("0.5.15").wheel
    broken = tmp_path / src.name.replace("0.5.15", "0.5.99")
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(broken, "w") as zout:
        for item in zin.infolist():
            if not any(k in item.filename for k in ("speculative/", "server_args.py", "trtllm_mha")):
                continue  # the files a profile reads: a small wheel, written fast
            data = zin.read(item)
            if item.filename.endswith("frozen_kv_mtp_worker_v2.py"):
                data = data.replace(b"self.speculative_num_steps <= 1", b"self.num_steps_bound()")
            zout.writestr(item, data)
    with pytest.raises(ProfileUnavailable, match="eager rule"):
        compute_profile(WheelSources(broken), "0.5.99")
    assert check_sources(WheelSources(broken), "0.5.99")  # the contract is still located


def test_docs_release_table_is_generated_from_the_wheels() -> None:
    """docs/releases.md's tables are `sglang-repro releases --markdown` of the releases its marker names."""
    from harness.contract.release_line import markdown, release_line

    doc = (ROOT / "docs/releases.md").read_text()
    head = "<!-- generated by: sglang-repro releases --markdown "
    start = doc.index(head)
    versions = doc[start + len(head):doc.index(" -->", start)].split()
    assert set(LINE) <= set(versions)
    for version in versions:
        release_wheel(version)
    body = doc[doc.index("-->", start) + 4:doc.index("\n<!-- end generated -->")]
    assert body == markdown(release_line(versions)), "regenerate: sglang-repro releases --markdown " + " ".join(versions)


def test_a_deprecated_flag_is_written_in_the_builds_words(rows: dict) -> None:
    """--disable-cuda-graph on 0.5.23 (deprecated since 0.5.14, server_args.py 0.5.23 :411) becomes the two
    per-phase flags its deprecation names; 0.5.13.post1, where it is current, keeps it."""
    from harness.contract.render import in_build_words

    args = {"disable-cuda-graph": True, "speculative-num-steps": 3}
    new = in_build_words(args, rows["0.5.23"].profile)
    assert new.args == {"speculative-num-steps": 3, "cuda-graph-backend-decode": "disabled",
                        "cuda-graph-backend-prefill": "disabled"}
    (note,) = new.notes
    assert "--disable-cuda-graph is deprecated in sglang 0.5.23 (srt/server_args.py:411" in note
    assert in_build_words(args, rows["0.5.13.post1"].profile).args == args
    fields = release_wheel("0.5.23").text("srt/arg_groups/fields/exec_.py") or ""
    assert "cuda_graph_backend_decode: A[" in fields and "cuda_graph_backend_prefill: A[" in fields


@pytest.mark.slow
def test_preflight_renders_a_seed_case_in_the_builds_words_and_records_its_profile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.build import Build, resolve_build
    from harness.launch.build_profile import build_profile, case_in_build_words
    from harness.scenario import load_file, select_cases, server_flags

    package = tmp_path / "sglang"
    sources = release_wheel("0.5.23")
    for name in ("srt/speculative/frozen_kv_mtp_worker_v2.py", "srt/layers/attention/trtllm_mha_backend.py",
                 "srt/server_args.py", "srt/arg_groups/speculative_hook.py"):
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(sources.text(name) or "")
    monkeypatch.setenv("SGLANG_REPRO_CACHE", str(tmp_path / "cache"))  # the per-build answers: this test's own
    build = Build("python", f"python:{package}", "/nonexistent/python", ("python", "-m", "sglang.launch_server"),
                  version="0.5.23", location=str(package))
    scenario = ROOT / "scenarios/frozen_kv_mtp/long_prompt_stale_out_cache_loc.yaml"
    (case,) = select_cases(load_file(scenario), "tokens=276,path=eager")
    assert case.scenario.server.args.get("disable-cuda-graph") is True
    rendered, notes = case_in_build_words(build, case)
    flags = server_flags(rendered.scenario)
    assert "--disable-cuda-graph" not in flags and "--cuda-graph-backend-decode" in flags and notes
    profile = build_profile(build)
    assert profile["fix_present"] is True and profile["eager_max_steps"] == 0
    sim = build_profile(resolve_build("sim:pre-fix,rules=0.5.23"))
    assert sim["eager_max_steps"] == 0 and "not SGLang" in sim["model"]


def test_bisect_releases_says_in_advance_where_the_bug_should_be() -> None:
    """The eager case of the seed scenario over 0.5.13.post1..0.5.23: a crash before the fix, a pass after; its
    one-step variant takes the graph path on 0.5.23 (the eager rule moved)."""
    from harness.bisect.release_plan import expect_per_release
    from harness.scenario import load_file, select_cases

    for version in LINE:
        release_wheel(version)
    scenario = ROOT / "scenarios/frozen_kv_mtp/long_prompt_stale_out_cache_loc.yaml"
    (case,) = select_cases(load_file(scenario), "tokens=276,path=eager")
    got = {e.version: e for e in expect_per_release(case, LINE, "pip:sglang=={version}")}
    assert [got[v].expect for v in LINE] == ["crash", "crash", "crash", "pass", "pass", "pass"]
    assert "eager path here" in got["0.5.14"].why and "fix present" in got["0.5.23"].why
    one_step = dataclasses.replace(case, scenario=case.scenario.model_copy(update={"server": case.scenario.server.model_copy(
        update={"args": {**case.scenario.server.args, "disable-cuda-graph": False, "speculative-num-steps": 1}})}))
    planned = {e.version: e for e in expect_per_release(one_step, ("0.5.14", "0.5.23"), "pip:sglang=={version}")}
    assert "eager path here" in planned["0.5.14"].why and "graph path here" in planned["0.5.23"].why
    other = expect_per_release(case, ("0.1.0",), "simsrc:/x@v{version}")
    assert other[0].expect == "unknown" and "no wheel profile" in other[0].why


@pytest.mark.slow
def test_minimize_writes_its_minimal_repro_in_the_builds_words(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The minimal scenario of a minimization on 0.5.23 says --cuda-graph-backend-{decode,prefill} disabled
    (the words 0.5.23 takes) and that build's eager rule (a one-step draft is not eager there)."""
    from harness.build import Build
    from harness.minimize.atoms import base_mapping, initial_candidate
    from harness.minimize.observation import Target
    from harness.minimize.output import minimal_mapping
    from harness.records.outcome import Outcome
    from harness.scenario import load_file, select_cases

    package = tmp_path / "sglang"
    sources = release_wheel("0.5.23")
    for name in ("srt/speculative/frozen_kv_mtp_worker_v2.py", "srt/layers/attention/trtllm_mha_backend.py",
                 "srt/server_args.py", "srt/arg_groups/speculative_hook.py"):
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(sources.text(name) or "")
    monkeypatch.setenv("SGLANG_REPRO_CACHE", str(tmp_path / "cache"))
    build = Build("python", f"python:{package}", "/nonexistent/python", ("python", "-m", "sglang.launch_server"),
                  version="0.5.23", location=str(package))
    scenario = ROOT / "scenarios/frozen_kv_mtp/long_prompt_stale_out_cache_loc.yaml"
    (case,) = select_cases(load_file(scenario), "tokens=276,path=eager")
    data = minimal_mapping(base_mapping(case.scenario, scenario), initial_candidate(case.scenario), case=case,
                           build=build, target=Target(Outcome.CRASH, None, None, ()), runs=3)
    args = data["server"]["args"]
    assert "disable-cuda-graph" not in args
    assert args["cuda-graph-backend-decode"] == args["cuda-graph-backend-prefill"] == "disabled"
    assert "--speculative-num-steps <= 0" in data["description"]


def test_reports_show_what_the_build_is(rows: dict) -> None:
    from harness.compare.verdicts import RoleResult
    from harness.contract.profile import describe_profile
    from harness.records.outcome import Outcome
    from harness.report import html, markdown

    line = describe_profile(rows["0.5.23"].profile.to_json())
    assert line.startswith("fix #29616 present; eager when") and "<= 0" in line and "present-but-unreachable" in line
    assert describe_profile({"unavailable": "no worker"}) == "profile unavailable: no worker"
    role = RoleResult(role="after", build="pip:sglang==0.5.23", build_kind="pip", version="0.5.23",
                      outcomes=(Outcome.PASS,), profile=line)
    assert "fix #29616 present" in markdown._build_cell(role) and "&lt;= 0" in html._build_cell(role)
