"""The minimizer's parts without a server: ddmin, the length search, atoms, digests, known runs, the rule."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from harness.build import resolve_build
from harness.minimize.atoms import Atom, atom_class, base_mapping, initial_candidate, to_mapping
from harness.minimize.ddmin import DDState, ddmin, smallest_failing
from harness.minimize.defaults import read_defaults
from harness.minimize.observation import Observation, Target, frames_of, observe
from harness.minimize.oracle import Oracle, Verdict, repetition_rule
from harness.records.outcome import Outcome, Phase
from harness.records.run_record import RunRecord
from harness.scenario import load_file, select_cases
from harness.store.searches import SearchRuns
from harness.store.store import new_batch
from harness.version import harness_version
from tests.helpers import make_record

REPO = Path(__file__).resolve().parents[2]
LONG = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"


def _oracle_for(items_needed: set[int], log: list[list[int]]):
    def first_interesting(candidates):
        for i, cand in enumerate(candidates):
            log.append(list(cand))
            if items_needed <= set(cand):
                return i
        return None

    return first_interesting


@pytest.mark.parametrize("needed", [{3}, {0, 7}, {2, 5, 11}, set(range(12))])
def test_ddmin_finds_exactly_the_needed_atoms(needed):
    log: list[list[int]] = []
    state = DDState(items=list(range(12)))
    assert sorted(ddmin(state, _oracle_for(needed, log))) == sorted(needed)
    assert state.done


def test_ddmin_is_one_minimal_when_either_of_two_atoms_suffices():
    # Like the eager trigger: --speculative-num-steps 1 OR --disable-cuda-graph.
    def first_interesting(candidates):
        return next((i for i, c in enumerate(candidates) if "alg" in c and ({"steps1", "nocg"} & set(c))), None)

    got = ddmin(DDState(items=["tp", "alg", "steps1", "hicache", "nocg", "mem"]), first_interesting)
    assert "alg" in got and len(got) == 2 and ({"steps1", "nocg"} & set(got))


def test_ddmin_asks_again_for_candidates_it_already_had():
    # Why the cache pays: ddmin revisits configurations, the textbook formulation more so.
    repeats = {}
    for textbook in (False, True):
        log: list[list[int]] = []
        ddmin(DDState(items=list(range(8))), _oracle_for({1, 6}, log), textbook=textbook)
        repeats[textbook] = len(log) - len({tuple(c) for c in log})
    assert 0 < repeats[False] < repeats[True]


@pytest.mark.parametrize("gallop", [True, False])
@pytest.mark.parametrize(("threshold", "high"), [(1, 1), (1, 276), (2, 276), (271, 276), (276, 276), (33, 64), (7, 9)])
def test_smallest_failing_finds_the_threshold_asking_each_value_once(threshold, high, gallop):
    asked: list[int] = []

    def fails(v: int) -> bool:
        asked.append(v)
        return v >= threshold

    assert smallest_failing(1, high, fails, gallop=gallop) == threshold
    assert len(asked) == len(set(asked)) and high not in asked


def test_galloping_is_cheaper_for_small_answers():
    counts = {}
    for gallop in (True, False):
        asked: list[int] = []

        def fails(v: int, asked: list[int] = asked) -> bool:
            asked.append(v)
            return v >= 2

        smallest_failing(1, 2048, fails, gallop=gallop)
        counts[gallop] = len(asked)
    assert counts[True] < counts[False]


def test_atoms_classes_and_round_trip():
    (case,) = select_cases(load_file(LONG), "tokens=276,path=eager")
    cand = initial_candidate(case.scenario)
    names = [a.name for a in cand.atoms]
    assert names[:2] == ["speculative-algorithm", "speculative-eagle-topk"] and "disable-cuda-graph" in names
    classes = {a.name: atom_class(a) for a in cand.atoms}
    assert classes["tp-size"] == classes["enable-hierarchical-cache"] == classes["hicache-ratio"] == "likely"
    assert classes["speculative-num-steps"] == classes["disable-cuda-graph"] == "behaviour"
    assert atom_class(Atom("env", "SGLANG_X", "1")) == "likely"
    base = base_mapping(case.scenario, case.file)
    assert "matrix" not in base and "reference" not in base
    small = cand.without([a for a in cand.atoms if a.name == "tp-size"]).with_shape(requests=1, tokens=5)
    data = to_mapping(base, small)
    assert "tp-size" not in data["server"]["args"] and data["server"]["args"]["disable-cuda-graph"] is True
    assert data["workload"]["requests"] == 1 and data["workload"]["prompt"]["tokens"] == 5


def test_environment_variables_are_atoms_too():
    (case,) = select_cases(load_file(LONG), "tokens=276,path=eager")
    with_env = case.scenario.model_copy(update={"server": case.scenario.server.model_copy(
        update={"env": {"SGLANG_ENABLE_X": "1", "NCCL_DEBUG": "INFO"}})})
    cand = initial_candidate(with_env)
    env = [a for a in cand.atoms if a.kind == "env"]
    assert [a.name for a in env] == ["SGLANG_ENABLE_X", "NCCL_DEBUG"]
    data = to_mapping(base_mapping(with_env, case.file), cand.without(env[:1]))
    assert data["server"]["env"] == {"NCCL_DEBUG": "INFO"}
    assert "env" not in to_mapping(base_mapping(with_env, case.file), cand.without(env))["server"]


def _oracle(tmp_path: Path, case) -> Oracle:
    build = resolve_build("sim:pre-fix")

    def no_runs(case, trial):
        raise AssertionError("this test starts no server")

    return Oracle(base=base_mapping(case.scenario, case.file), build=build, defaults=read_defaults(build),
                  runner=no_runs, runs=SearchRuns(None, new_batch("minimize")), use_cache=True, jobs=1,
                  work_dir=tmp_path, deadline=None)


def test_digest_drops_defaults_and_merges_aliases(tmp_path):
    (case,) = select_cases(load_file(LONG), "tokens=276,path=eager")
    oracle = _oracle(tmp_path, case)
    cand = initial_candidate(case.scenario)
    hicache_ratio = next(a for a in cand.atoms if a.name == "hicache-ratio")
    assert hicache_ratio.value == 2  # the sim parser's default is 2.0: the same configuration
    assert oracle.digest(cand) == oracle.digest(cand.without([hicache_ratio]))
    tp = next(a for a in cand.atoms if a.name == "tp-size")
    assert oracle.digest(cand.with_value(tp, 1)) == oracle.digest(cand.without([tp]))
    aliased = cand.without([tp])
    aliased = aliased.__class__(atoms=(*aliased.atoms, Atom("flag", "tp", 4)), shape=aliased.shape)
    assert oracle.digest(aliased) == oracle.digest(cand)
    assert oracle.digest(cand) != oracle.digest(cand.with_shape(max_new_tokens=2))


def test_a_combination_the_parser_rejects_is_not_tried(tmp_path):
    (case,) = select_cases(load_file(LONG), "tokens=276,path=eager")
    oracle = _oracle(tmp_path, case)
    oracle.target = Target(Outcome.CRASH, "frozen-kv-mtp-stale-out-cache-loc", Phase.WORKLOAD, ())
    cand = initial_candidate(case.scenario)
    steps = next(a for a in cand.atoms if a.name == "speculative-num-steps")
    bad = cand.with_value(steps, "one")
    assert oracle.first_interesting("values", [("--speculative-num-steps one", bad)]) is None
    (row,) = oracle.attempts
    assert row.verdict == Verdict.NOT_TRIED and row.runs == 0 and "invalid int value" in row.detail
    assert oracle.fresh_runs == 0


def test_target_matching():
    obs = Observation(Outcome.CRASH, "sig", Phase.WORKLOAD, ("a.py:f", "b.py:g"), "why", 1.5, "/x", ("python", "-m"))
    target = Target.of(obs)
    assert target.matches(obs)
    for other in (obs.__class__(**{**obs.__dict__, "signature": "other"}),
                  obs.__class__(**{**obs.__dict__, "phase": Phase.WARMUP}),
                  obs.__class__(**{**obs.__dict__, "frames": ("a.py:f",)})):
        assert not target.matches(other)


def test_frames_ignore_line_numbers_and_take_the_last_traceback():
    one = 'Traceback (most recent call last):\n  File "/x/old.py", line 1, in gone\nValueError: x\n'
    two = ('Traceback (most recent call last):\n  File "/a/b/scheduler.py", line 10, in step\n'
           '  File "C:\\\\w\\\\model_runner.py", line 99, in forward\nRuntimeError: y\n')
    assert frames_of(one + two) == ("scheduler.py:step", "model_runner.py:forward")
    assert frames_of(two.replace("line 10", "line 11")) == frames_of(two)


def test_repetition_rule():
    assert repetition_rule(3, 3).runs_to_reject == 1
    assert repetition_rule(2, 3).runs_to_reject == 3
    assert repetition_rule(1, 3).runs_to_reject == 6
    assert all("baseline" in repetition_rule(h, 3).text for h in (1, 2, 3))


def test_command_is_registered():
    from harness.cli import make_parser

    parser = make_parser()
    args = parser.parse_args(["minimize", str(LONG), "--case", "x", "--build", "sim:pre-fix", "--jobs", "2"])
    assert args.jobs == 2
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["minimize", str(LONG), "--build", "sim:pre-fix", "--budget", "-3"])
    assert exc.value.code == 2




@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.5.14", "0.5.15"])
def test_defaults_come_from_the_real_builds_parser(version):
    # sglang/srt/server_args.py: tp_size = 1 with alias --tensor-parallel-size (0.5.14:849, 0.5.15:816);
    # hicache_ratio = 2.0 (0.5.14:1776, 0.5.15:1992); --disable-cuda-graph is a switch.
    from harness.build import ensure_pip_env

    ensure_pip_env(version, deps="none")
    defaults = read_defaults(resolve_build(f"pip:sglang=={version},deps=none"))
    tp, alias, switch = defaults.info("tp-size"), defaults.info("tensor-parallel-size"), defaults.info("disable-cuda-graph")
    assert tp is not None and alias is not None and switch is not None
    assert tp.default == 1
    assert alias.dest == tp.dest == "tp_size"
    assert defaults.is_default("hicache-ratio", 2) and not defaults.is_default("hicache-ratio", 3)
    assert switch.switch and not defaults.is_default("disable-cuda-graph", True)
    assert defaults.canonical("tensor-parallel-size", 4) == defaults.canonical("tp-size", "4") == ("tp_size", 4)


# --------------------------------------------------------------------------- the search against model products
# A product here is a small function of the candidate's flags and workload (the runner seam): the search's
# logic runs end to end in milliseconds. The real reference server is exercised in test_minimize_sim.py.

FRAMES = ("worker.py:draft_forward", "model_runner.py:forward_decode")
TRACEBACK = ('Traceback (most recent call last):\n  File "/x/worker.py", line 7, in draft_forward\n'
             '  File "/x/model_runner.py", line 9, in forward_decode\nRuntimeError: boom\n')
_RUN_IDS = itertools.count()


def _record(outcome: Outcome, *, signature: str | None = None, phase: Phase | None = None, excerpt: str = "",
            reason: str = "") -> RunRecord:
    """A run record as execute_run returns one (what a product gives the minimizer)."""
    return make_record(outcome, run_id=f"product-{next(_RUN_IDS)}", scenario="product", case="c", case_values={},
                       spec="sim:pre-fix", signature=signature, reason=reason or outcome.value, metrics={},
                       argv=("python", "-m", "server"), started_at="2026-12-01T00:00:00+00:00", duration_s=0.01,
                       harness_version=harness_version(), phase=phase, excerpt=excerpt)


def _obs(crash: bool, signature: str = "frozen-kv-mtp-stale-out-cache-loc", phase: str = "workload") -> RunRecord:
    if not crash:
        return _record(Outcome.PASS, reason="all checks held")
    return _record(Outcome.CRASH, signature=signature, phase=Phase(phase), excerpt=TRACEBACK, reason="boom")


def test_a_product_record_is_observed_as_the_failure():
    assert observe(_obs(True)) == Observation(Outcome.CRASH, "frozen-kv-mtp-stale-out-cache-loc", Phase.WORKLOAD, FRAMES,
                                              "boom", 0.01, "", ("python", "-m", "server"))


def _eager_case():
    (case,) = select_cases(load_file(LONG), "tokens=276,path=eager")
    return case


def _with_args(case, **args):
    sc = case.scenario
    server = sc.server.model_copy(update={"args": {**sc.server.args, **args}})
    return case.__class__(file=case.file, name=case.name, values=case.values,
                          scenario=sc.model_copy(update={"server": server}))


def test_values_move_toward_the_parsers_default_and_the_prompt_to_its_threshold(tmp_path):
    from harness.minimize import MinimizeOptions, minimize

    def product(case, trial):
        args, wl = case.scenario.server.args, case.scenario.workload
        return _obs("speculative-algorithm" in args and int(args.get("page-size", 1)) >= 5
                    and wl.prompt.lengths()[0] >= 3 and wl.max_new_tokens >= 2)

    res = minimize(_with_args(_eager_case(), **{"page-size": 64}), resolve_build("sim:pre-fix"),
                   MinimizeOptions(out_root=tmp_path, runner=product))
    assert res.exit_code == 0, res.message
    assert res.minimal is not None
    assert {a.name: a.value for a in res.minimal.atoms} == {"speculative-algorithm": "NEXTN", "page-size": 5}
    assert (res.minimal.shape.tokens, res.minimal.shape.max_new_tokens, res.minimal.shape.requests) == (3, 2, 1)
    assert any(a.step == "values" and "(default 1)" in a.change for a in res.attempts)
    # Never the same configuration twice: every fresh run has a digest of its own (baseline/confirm aside).
    ran = [a.digest for a in res.attempts if a.runs and a.step not in ("baseline", "confirm")]
    assert len(ran) == len(set(ran))


def test_a_flaky_failure_follows_the_stated_rule(tmp_path):
    from harness.minimize import MinimizeOptions, minimize

    calls = itertools.count()

    def product(case, trial):
        args = case.scenario.server.args
        if "speculative-algorithm" not in args:
            return _obs(False)
        if "tp-size" in args:  # flaky while TP is on: 2 runs of 3 crash
            return _obs(next(calls) % 3 != 2)
        return _obs(True)

    res = minimize(_eager_case(), resolve_build("sim:pre-fix"), MinimizeOptions(out_root=tmp_path, runner=product))
    assert res.rule.startswith("flaky (2/3")
    rejected = [a for a in res.attempts if a.verdict == Verdict.NOT_INTERESTING and a.step != "confirm"]
    assert rejected and all(a.runs in (0, 3) for a in rejected)  # k = 3 runs before "not interesting"
    assert res.exit_code == 0 and res.minimal is not None and "tp-size" not in {a.name for a in res.minimal.atoms}


def test_a_failure_that_never_reproduces_3_of_3_writes_nothing(tmp_path):
    from harness.minimize import MinimizeOptions, minimize

    calls = itertools.count()

    def product(case, trial):
        return _obs(next(calls) % 3 != 2)

    res = minimize(_eager_case(), resolve_build("sim:pre-fix"), MinimizeOptions(out_root=tmp_path, runner=product))
    assert res.exit_code == 1 and res.status == "not-reproducible"
    assert not (res.session_dir / "minimal.yaml").exists()
    assert [a.step for a in res.attempts].count("confirm") >= 2  # walked back to earlier reductions


def test_another_signature_or_phase_is_never_accepted(tmp_path):
    from harness.minimize import MinimizeOptions, minimize

    def product(case, trial):
        args = case.scenario.server.args
        if "speculative-algorithm" not in args:
            return _obs(False)
        if "mem-fraction-static" not in args:  # dropping it gives another crash
            return _obs(True, signature="cuda-out-of-memory")
        if "context-length" not in args:  # dropping this one: the same signature, but at start-up
            return _obs(True, phase="start-up")
        return _obs(True)

    res = minimize(_eager_case(), resolve_build("sim:pre-fix"), MinimizeOptions(out_root=tmp_path, runner=product))
    assert res.exit_code == 0 and res.minimal is not None
    assert {"speculative-algorithm", "mem-fraction-static", "context-length"} == {a.name for a in res.minimal.atoms}
    assert any("cuda-out-of-memory" in s for s in res.slips) and any("at start-up" in s for s in res.slips)


def test_a_run_that_could_not_tell_is_retried_once(tmp_path):
    from harness.minimize import MinimizeOptions, minimize

    calls = itertools.count()

    def product(case, trial):
        if next(calls) == 0:  # e.g. another program took the leased port
            return _record(Outcome.INFRA, signature="address-in-use", phase=Phase.STARTUP, reason="port taken")
        return _obs("speculative-algorithm" in case.scenario.server.args)

    res = minimize(_eager_case(), resolve_build("sim:pre-fix"), MinimizeOptions(out_root=tmp_path, runner=product))
    assert res.exit_code == 0 and res.rule.startswith("deterministic (3/3")
    assert [o.outcome for o in res.baseline] == ["crash"] * 3
    assert res.attempts[0].runs == 4


def test_flag_checks_on_many_threads_leave_the_process_streams_alone():
    # `minimize --jobs N` pre-flights N runs at once; swapping sys.stdout per thread lost the report once.
    import sys
    import threading

    from harness.launch.launcher import launcher_for

    launcher = launcher_for(resolve_build("sim:pre-fix"))
    before = (sys.stdout, sys.stderr)
    answers: list[str] = []

    def check(i: int) -> None:
        for _ in range(20):
            (bad,) = launcher.check_flags([["--model-path", "m", f"--no-such-flag-{i}"]])
            (good,) = launcher.check_flags([["--model-path", "m"]])
            assert good.ok and not bad.ok
            answers.append(bad.message)

    threads = [threading.Thread(target=check, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (sys.stdout, sys.stderr) == before
    assert len(answers) == 120 and all("unrecognized arguments: --no-such-flag-" in a for a in answers)


# --------------------------------------------------------------------------- the store is the memory


def _counting(product):
    calls = itertools.count()

    def runner(case, trial):
        next(calls)
        return product(case, trial)

    return runner, calls


def _needs_nextn_and_two_tokens(case, trial):
    return _obs("speculative-algorithm" in case.scenario.server.args and case.scenario.workload.max_new_tokens >= 2)


def _candidate_runs(res) -> int:
    return sum(a.runs for a in res.attempts if a.step not in ("baseline", "confirm"))


def test_a_repeated_minimization_answers_every_candidate_from_the_store(tmp_path):
    from harness.minimize import MinimizeOptions, minimize
    from harness.store.store import open_store

    store = str(tmp_path / "results.db")
    runner, calls = _counting(_needs_nextn_and_two_tokens)
    first = minimize(_eager_case(), resolve_build("sim:pre-fix"),
                     MinimizeOptions(out_root=tmp_path / "1", runner=runner, store=store))
    assert first.exit_code == 0, first.message
    first_calls = next(calls)
    assert _candidate_runs(first) > 0
    with open_store(store) as opened:
        frame = opened.runs_frame()
    assert len(frame) == first_calls  # every run is a run record in the store
    assert set(frame["batch_kind"]) == {"minimize"} and set(frame["batch_label"]) == {first.session_dir.name}

    runner, calls = _counting(_needs_nextn_and_two_tokens)
    again = minimize(_eager_case(), resolve_build("sim:pre-fix"),
                     MinimizeOptions(out_root=tmp_path / "2", runner=runner, store=store))
    assert again.exit_code == 0 and again.minimal == first.minimal
    assert _candidate_runs(again) == 0  # only the baseline and the confirmation run again, as the rule asks
    assert next(calls) == 3 + 3


def test_an_interrupted_minimization_run_again_pays_only_for_what_is_new(tmp_path):
    from harness.minimize import MinimizeOptions, minimize

    build = resolve_build("sim:pre-fix")
    runner, _ = _counting(_needs_nextn_and_two_tokens)
    whole = minimize(_eager_case(), build, MinimizeOptions(out_root=tmp_path / "whole", runner=runner,
                                                          store=str(tmp_path / "whole.db")))
    assert whole.exit_code == 0, whole.message

    store = str(tmp_path / "results.db")
    calls = itertools.count()

    def interrupted(case, trial):
        if next(calls) == 12:  # Ctrl-C in the 13th run: 12 runs (3 of them the baseline) are recorded
            raise KeyboardInterrupt
        return _needs_nextn_and_two_tokens(case, trial)

    with pytest.raises(KeyboardInterrupt):
        minimize(_eager_case(), build, MinimizeOptions(out_root=tmp_path / "1", runner=interrupted, store=store))
    again = minimize(_eager_case(), build, MinimizeOptions(out_root=tmp_path / "2", runner=runner, store=store))
    assert again.exit_code == 0 and again.minimal == whole.minimal
    assert _candidate_runs(again) == _candidate_runs(whole) - (12 - 3)


def test_plain_ddmin_records_its_runs_but_never_reuses_them(tmp_path):
    from harness.minimize import MinimizeOptions, minimize

    store = str(tmp_path / "results.db")
    build = resolve_build("sim:pre-fix")
    runner, _ = _counting(_needs_nextn_and_two_tokens)
    first = minimize(_eager_case(), build, MinimizeOptions(out_root=tmp_path / "1", runner=runner, store=store,
                                                          plain=True))
    again = minimize(_eager_case(), build, MinimizeOptions(out_root=tmp_path / "2", runner=runner, store=store,
                                                          plain=True))
    assert first.exit_code == again.exit_code == 0
    assert again.fresh_runs == first.fresh_runs and all(a.reused_from is None for a in again.attempts)


def test_progress_is_told_of_every_server_run(tmp_path):
    """minimize shows its runs as they happen (it printed nothing for minutes): the count it is told ends at the
    number of server runs the search made."""
    from harness.minimize import MinimizeOptions, minimize

    seen: list[tuple[int, str]] = []

    def product(case, trial):
        return _obs("speculative-algorithm" in case.scenario.server.args)

    res = minimize(_eager_case(), resolve_build("sim:pre-fix"),
                   MinimizeOptions(out_root=tmp_path, runner=product,
                                   progress=lambda n, record: seen.append((n, record.outcome.value))))
    assert res.exit_code == 0, res.message
    assert [n for n, _ in seen] == list(range(1, len(seen) + 1))
    assert len(seen) == res.fresh_runs and {o for _, o in seen} == {"crash", "pass"}


def test_the_minimal_scenario_names_tiny_models_portably_not_by_this_machines_cache(tmp_path):
    # The real-SGLang CPU launcher runs `tiny:gemma4` from this machine's cache folder (CpuLauncher.case_for puts the
    # folder in its place); the minimal scenario is handed to others, whose caches lie elsewhere: it says tiny:NAME.
    import yaml

    from harness.build.tiny_model_cache import tiny_model_path
    from harness.minimize import MinimizeOptions, minimize

    on_cpu = _eager_case().for_cpu()
    sc = on_cpu.scenario
    assert (sc.server.model, sc.server.draft_model) == ("tiny:gemma4", "tiny:gemma4-assistant")
    resolved = sc.server.model_copy(update={"model": str(tiny_model_path("tiny:gemma4")),
                                            "draft_model": str(tiny_model_path("tiny:gemma4-assistant"))})
    case = on_cpu.__class__(file=on_cpu.file, name=on_cpu.name, values=on_cpu.values,
                            scenario=sc.model_copy(update={"server": resolved}))
    ran: list[str] = []

    def product(case, trial):
        ran.append(case.scenario.server.model)
        return _obs("speculative-algorithm" in case.scenario.server.args)

    out = tmp_path / "minimal.yaml"
    res = minimize(case, resolve_build("sim:pre-fix"), MinimizeOptions(out_root=tmp_path, runner=product, output=out))
    assert res.exit_code == 0, res.message
    server = yaml.safe_load(out.read_text())["server"]
    assert (server["model"], server["draft_model"]) == ("tiny:gemma4", "tiny:gemma4-assistant")
    assert str(tiny_model_path("tiny:gemma4")) not in out.read_text()
    assert res.minimal_mapping is not None and res.minimal_mapping["server"]["model"] == "tiny:gemma4"
    # The confirmation runs read the written file: the name loads and goes to the launcher, which resolves it again.
    assert ran[-1] == "tiny:gemma4"
