"""`sglang-repro minimize` on the CPU reference server at pre-fix, from the #28264 scenario's eager case."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness.build import resolve_build
from harness.minimize import MinimizeOptions, minimize
from harness.minimize.atoms import Atom, base_mapping, initial_candidate
from harness.minimize.defaults import read_defaults
from harness.minimize.observation import Target, observe
from harness.minimize.oracle import Oracle, Verdict
from harness.pipeline import RunOptions, execute_run
from harness.scenario import load_file, select_cases
from harness.store.searches import SearchRuns
from harness.store.store import new_batch
from tests.process_marks import alive, command_line

REPO = Path(__file__).resolve().parents[2]
LONG = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"
EAGER = "tokens=276,path=eager"
SIGNATURE = "frozen-kv-mtp-stale-out-cache-loc"
# The searches run on the stand-in of the reference server (harness.sim.standin; tests/sim/test_standin_contract.py
# holds it to the same contract): a minimization starts a server a try, ~36 for the eager case. What a search
# finds is then held to the reference server itself (the minimized file crashes there with the same signature, one
# token shorter does not); the other crash and Ctrl-C run on the reference server.
STANDIN = ",scheduler=standin"

pytestmark = [pytest.mark.slow, pytest.mark.sim]


def eager_case():
    (case,) = select_cases(load_file(LONG), EAGER)
    return case


def test_eager_case_minimizes_to_the_trigger_and_the_smallest_crashing_prompt(tmp_path, run_cli):
    out = tmp_path / "minimal.yaml"
    res = minimize(eager_case(), resolve_build("sim:pre-fix" + STANDIN),
                   MinimizeOptions(jobs=2, out_root=tmp_path, output=out))
    assert res.exit_code == 0, res.message
    assert res.target is not None and res.target.signature == SIGNATURE
    assert len(res.confirmations) == 3 and all(res.target.matches(o) for o in res.confirmations)
    tries = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("server*.log"))
    assert "sim_scheduler='standin'" in tries and "sim_scheduler='model'" not in tries

    (case,) = load_file(out).cases  # the written file validates
    args = case.scenario.server.args
    assert not {"tp-size", "enable-hierarchical-cache", "hicache-ratio", "mem-fraction-static",
                "context-length"} & set(args)
    assert args.get("speculative-algorithm") == "NEXTN"
    assert args.get("speculative-num-steps") == 1 or args.get("disable-cuda-graph") is True  # the eager trigger
    # Either trigger alone suffices (1-minimal keeps one). The case crashes in the workload because it skips
    # SGLang's warm-up; without that flag the crash moves to the warm-up, another phase: so it stays.
    assert args.get("skip-server-warmup") is True
    assert len(args) == 3
    assert case.scenario.hardware.gpus == 1
    assert case.scenario.expect["before"].signatures == (SIGNATURE,)

    # Nothing slipped: every accepted try had the target's signature; any other failure was rejected.
    for row in res.attempts:
        if row.verdict == Verdict.INTERESTING:
            assert SIGNATURE in row.detail

    # The smallest prompt length, on the reference server: tokens - 1 no longer reproduces (when tokens > 1).
    build = resolve_build("sim:pre-fix")
    tokens = case.scenario.workload.prompt.tokens
    assert isinstance(tokens, int) and tokens < 276
    if tokens > 1:
        shorter = case.scenario.model_copy(update={"workload": case.scenario.workload.model_copy(
            update={"prompt": case.scenario.workload.prompt.model_copy(update={"tokens": tokens - 1})})})
        record = execute_run(replace(case, scenario=shorter), build, options=RunOptions(out_root=tmp_path))
        assert not res.target.matches(observe(record))

    # Run as any scenario, on the reference server: the same signature.
    done = run_cli("run", out, "--build", "sim:pre-fix", "--out", tmp_path / "rerun", "--no-progress")
    assert done.returncode == 1 and f"signature={SIGNATURE}" in done.stdout, done.stdout + done.stderr
    assert "sim_scheduler='model'" in "".join(p.read_text() for p in (tmp_path / "rerun").rglob("server.log"))


def test_a_case_that_does_not_fail_exits_1_and_writes_nothing(tmp_path, run_cli):
    out = tmp_path / "minimal.yaml"
    done = run_cli("minimize", LONG, "--case", EAGER, "--build", "sim:post-fix" + STANDIN, "--out", tmp_path,
                   "-o", out, "--jobs", "3", timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "does not fail" in done.stdout and "3 of 3 runs passed" in done.stdout
    assert not out.exists()


def test_bad_input_exits_2(tmp_path, run_cli):
    done = run_cli("minimize", LONG, "--build", "sim:pre-fix", "--out", tmp_path)  # six cases, none picked
    assert done.returncode == 2 and "exactly one case" in done.stderr


def test_another_crash_is_not_interesting(tmp_path):
    """A flag combination with another real crash of the reference server (the CUDA-graph draft path on
    trtllm_mha with hybrid SWA at pre-fix, here with a one-entry buffer: the same PyTorch message as the
    eager crash, raised from other frames) is listed with its signature, never accepted."""
    case = eager_case()
    build = resolve_build("sim:pre-fix")
    oracle = Oracle(base=base_mapping(case.scenario, case.file), build=build, defaults=read_defaults(build),
                    runner=lambda c, t: execute_run(c, build, trial=t, options=RunOptions(out_root=tmp_path)),
                    runs=SearchRuns(None, new_batch("minimize")), use_cache=True, jobs=1, work_dir=tmp_path,
                    deadline=None)
    small = initial_candidate(case.scenario).with_shape(requests=1, max_new_tokens=2, tokens=4)
    baseline = oracle.materialize(small)
    assert not isinstance(baseline, str)
    oracle.target = Target.of(oracle.run_once(baseline, oracle.digest(small)))
    assert oracle.target.signature == SIGNATURE
    graph = [Atom("flag", "speculative-num-steps", 3), Atom("flag", "speculative-num-draft-tokens", 4),
             Atom("flag", "attention-backend", "trtllm_mha"), Atom("flag", "max-running-requests", 1)]
    kept = tuple(a for a in small.atoms if a.name != "disable-cuda-graph")
    slip = replace(small, atoms=(*kept, *graph))
    assert oracle.first_interesting("flags", [("slip", slip), ("no slip", small)]) == 1
    first, second = oracle.attempts
    assert first.verdict == Verdict.NOT_INTERESTING
    assert "frozen-kv-mtp-stale-out-cache-loc-graph" in first.detail
    assert second.verdict == Verdict.INTERESTING


def test_a_spent_budget_says_what_it_left_untried(tmp_path):
    res = minimize(eager_case(), resolve_build("sim:pre-fix" + STANDIN),
                   MinimizeOptions(budget_s=0.001, jobs=3, out_root=tmp_path))
    assert res.exit_code == 0, res.message
    assert res.untried and res.untried[0].startswith("workload")
    assert any(u.startswith("flags: not started") for u in res.untried)
    assert res.minimal == res.original  # nothing was reduced, and the original reproduces 3 of 3
    assert (res.session_dir / "minimal.yaml").is_file()


def test_ctrl_c_ends_the_session_with_no_server_left(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    import psutil

    proc = subprocess.Popen([sys.executable, "-m", "harness", "minimize", str(LONG), "--case", EAGER,
                             "--build", "sim:pre-fix", "--out", str(tmp_path)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        deadline = time.monotonic() + 60
        servers: list[psutil.Process] = []
        while time.monotonic() < deadline and not servers:
            time.sleep(0.5)
            servers = [p for p in psutil.Process(proc.pid).children(recursive=True)
                       if "harness.sim.server" in command_line(p)]
        assert servers, "no reference server started within 60 s"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    # Issue 24: an interrupted session decides nothing (exit 3) but writes its report of what it tried.
    assert proc.returncode == 3, out + err
    assert "minimize: interrupted" in out, out + err
    assert list(tmp_path.glob("minimize/*/report.md")), out + err
    time.sleep(0.5)
    assert not [p.pid for p in servers if alive(p)]
