"""The minimizer's parts without a server: ddmin, the length search, atoms, digests, the cache, the rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.build import resolve_build
from harness.minimize.atoms import Atom, atom_class, base_mapping, initial_candidate, to_mapping
from harness.minimize.cache import ObservationCache
from harness.minimize.ddmin import DDState, ddmin, smallest_failing
from harness.minimize.defaults import read_defaults
from harness.minimize.observation import Observation, Target, frames_of
from harness.minimize.oracle import Oracle, Verdict, repetition_rule
from harness.scenario import load_file, select_cases

REPO = Path(__file__).resolve().parent.parent
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
@pytest.mark.parametrize("threshold,high", [(1, 1), (1, 276), (2, 276), (271, 276), (276, 276), (33, 64), (7, 9)])
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
                  runner=no_runs, cache=ObservationCache(None), use_cache=True, jobs=1, work_dir=tmp_path,
                  deadline=None)


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
    oracle.target = Target("crash", "frozen-kv-mtp-stale-out-cache-loc", "workload", ())
    cand = initial_candidate(case.scenario)
    steps = next(a for a in cand.atoms if a.name == "speculative-num-steps")
    bad = cand.with_value(steps, "one")
    assert oracle.first_interesting("values", [("--speculative-num-steps one", bad)]) is None
    (row,) = oracle.attempts
    assert row.verdict == Verdict.NOT_TRIED and row.runs == 0 and "invalid int value" in row.detail
    assert oracle.fresh_runs == 0


def test_cache_round_trip_and_target_matching(tmp_path):
    obs = Observation("crash", "sig", "workload", ("a.py:f", "b.py:g"), "why", 1.5, "/x", ("python", "-m"))
    cache = ObservationCache(tmp_path / "c.json")
    cache.add("d1", obs)
    again = ObservationCache(tmp_path / "c.json")
    assert again.get("d1") == [obs] and again.get("d2") == []
    target = Target.of(obs)
    assert target.matches(obs)
    for other in (obs.__class__(**{**obs.__dict__, "signature": "other"}),
                  obs.__class__(**{**obs.__dict__, "phase": "warm-up"}),
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
    assert defaults.info("tp-size").default == 1
    assert defaults.info("tensor-parallel-size").dest == defaults.info("tp-size").dest == "tp_size"
    assert defaults.is_default("hicache-ratio", 2) and not defaults.is_default("hicache-ratio", 3)
    assert defaults.info("disable-cuda-graph").switch and not defaults.is_default("disable-cuda-graph", True)
    assert defaults.canonical("tensor-parallel-size", 4) == defaults.canonical("tp-size", "4") == ("tp_size", 4)
