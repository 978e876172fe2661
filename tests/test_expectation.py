"""The one expectation judge: outcomes, signatures, phases, every trial, not-run roles and hypotheses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.expectations.judge import judge_role, run_holds
from harness.records.outcome import Outcome, Phase
from harness.scenario.model import Expectation, ProfileExpectation
from tests.helpers import make_record

SIG = "frozen-kv-mtp-stale-out-cache-loc"
LONG = Path(__file__).resolve().parent.parent / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"


def test_a_run_holds_on_outcome_signature_and_phase() -> None:
    exp = Expectation(outcome="crash", signature=SIG, phase="warm-up")
    assert run_holds(exp, Outcome.CRASH, SIG, Phase.WARMUP)
    assert not run_holds(exp, Outcome.CRASH, SIG, Phase.WORKLOAD)
    assert not run_holds(exp, Outcome.CRASH, "other", Phase.WARMUP)
    assert not run_holds(exp, Outcome.PASS, None, Phase.WORKLOAD)
    assert run_holds(Expectation(outcome="crash", signature="unknown"), Outcome.CRASH, None, None)
    assert run_holds(Expectation(outcome=["crash", "pass"]), Outcome.PASS, None, Phase.WORKLOAD)


def test_a_role_holds_only_when_every_trial_does() -> None:
    exp = Expectation(outcome="pass")
    runs = [make_record("pass", trial=i) for i in range(4)] + [make_record("crash", signature=SIG, trial=4)]
    check = judge_role("after", exp, runs)
    assert not check.held and check.failed and (check.trials_matching, check.trials) == (4, 5)
    assert check.actual_outcome == "crash" and check.actual_signature == SIG and "4/5" in check.actual_text
    assert judge_role("after", exp, runs[:4]).held


def test_a_role_that_could_not_run_is_not_run_not_failed() -> None:
    exp = Expectation(outcome="crash", signature=SIG)
    runs = [make_record("infra", reason="pre-flight: hardware: needs 4 GPUs, found 0")] * 2
    check = judge_role("before", exp, runs)
    assert not check.held and not check.failed and check.state == "not run"
    assert check.not_run == "pre-flight: hardware: needs 4 GPUs, found 0"
    # ... unless infra was what the scenario expected.
    assert judge_role("before", Expectation(outcome="infra"), runs).held


def test_a_hypothesis_that_does_not_hold_is_an_observation() -> None:
    exp = Expectation(outcome="crash", status="hypothesis")
    check = judge_role("before", exp, [make_record("pass")])
    assert not check.held and not check.failed and check.observation and check.state == "observation"
    assert "(hypothesis)" in exp.describe()


def test_the_phase_shows_in_what_was_expected_and_got() -> None:
    exp = Expectation(outcome="crash", phase="warm-up")
    check = judge_role("before", exp, [make_record("crash", signature=SIG, phase="workload")])
    assert check.expected_outcome == "crash at warm-up" and check.actual_outcome == "crash at workload"


def test_expectation_lists_cannot_be_empty() -> None:
    with pytest.raises(ValueError, match="an empty list accepts nothing"):
        Expectation(outcome="crash", phase=[])


def test_a_role_cut_short_by_an_interrupt_is_not_run_even_after_a_passing_trial() -> None:
    """Issue 24: compare interrupted in its second trial exited 1 (a role 'failed'), not 3 (an interrupt)."""
    from harness.expectations.judge import judge_role
    from harness.scenario.model import Expectation
    from tests.helpers import make_record

    runs = [make_record("pass", trial=0), make_record("interrupted", trial=1, reason="interrupted (SIGINT)")]
    check = judge_role("after", Expectation(outcome="pass"), runs)
    assert not check.held and check.not_run == "interrupted (SIGINT)"
    # Every trial passed: held, nothing "not run".
    ok = judge_role("after", Expectation(outcome="pass"), runs[:1])
    assert ok.held and ok.not_run == ""


def test_a_profile_premise_holds_only_on_a_build_whose_profile_says_it() -> None:
    """expect.<role>.profile: the build the expectation is about (is the fix in, the eager rule, ...), judged on the
    profile each run recorded; a build that is not that one does not hold, and says why."""
    exp = Expectation(outcome="crash", signature=SIG, profile=ProfileExpectation(fix_present=False, eager_max_steps=1))
    before = {"version": "0.5.14", "fix_present": False, "eager_max_steps": 1, "swa_refill": "unguarded"}
    fixed = {**before, "version": "0.5.15", "fix_present": True}
    assert run_holds(exp, Outcome.CRASH, SIG, None, before)
    assert not run_holds(exp, Outcome.CRASH, SIG, None, fixed)
    assert not run_holds(exp, Outcome.CRASH, SIG, None, None)  # no profile recorded: the premise is not shown
    assert not run_holds(exp, Outcome.CRASH, SIG, None, {"unavailable": "no wheel"})
    held = judge_role("before", exp, [make_record("crash", signature=SIG, role="before", profile=before)])
    assert held.held and not held.premise and "fix_present=False" in held.expected_outcome
    check = judge_role("before", exp, [make_record("crash", signature=SIG, role="before", profile=fixed)])
    assert not check.held and check.failed
    assert "the build's profile says fix_present=True, the scenario expects False" in check.actual_text
    # the reference server's profile states its release rules, not a fix marker
    sim = {"model": "the CPU reference server", "eager_max_steps": 1, "topk_backends": ["triton"], "swa_refill": "none"}
    assert run_holds(Expectation(outcome="pass", profile=ProfileExpectation(topk_backends=["triton"])), Outcome.PASS,
                     None, None, sim)
    gap = judge_role("after", exp, [make_record("crash", signature=SIG, profile=sim)]).premise
    assert gap == "the build's profile does not state fix_present"
    from_dict = type(check).from_dict(check.to_dict())
    assert from_dict.premise == check.premise


def test_a_profile_premise_must_state_something_known() -> None:
    with pytest.raises(ValueError, match="states nothing"):
        Expectation.model_validate({"outcome": "crash", "profile": {}})
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        Expectation.model_validate({"outcome": "crash", "profile": {"fix": True}})
    with pytest.raises(ValueError, match="unguarded"):
        Expectation.model_validate({"outcome": "crash", "profile": {"swa_refill": "sometimes"}})


def _with_premise(tmp_path: Path, premise: str) -> Path:
    text = LONG.read_text()
    old = "    evidence: https://github.com/sgl-project/sglang/pull/28817\n"
    assert old in text
    path = tmp_path / "premise.yaml"
    path.write_text(text.replace(old, old + premise, 1))
    return path


def test_a_bad_profile_premise_is_a_one_line_error_naming_file_and_line(run_cli, tmp_path: Path) -> None:
    path = _with_premise(tmp_path, "    profile: {fix_present: maybe}\n")
    res = run_cli("validate", path)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    line = 1 + next(i for i, ln in enumerate(path.read_text().splitlines()) if "fix_present: maybe" in ln)
    assert lines[0].startswith(f"{path}:{line}:") and "expect.before.profile.fix_present" in lines[0], lines
    assert run_cli("validate", _with_premise(tmp_path, "    profile: {eager_max_steps: 1}\n")).returncode == 0


@pytest.mark.parametrize(("steps", "held"), [(1, True), (0, False)])
def test_a_run_judges_the_premise_on_the_profile_it_recorded(run_cli, tmp_path: Path, steps: int, held: bool) -> None:
    """The reference server at its default rules (0.5.14's and 0.5.15's: a draft of <= 1 step is eager) holds a
    premise of eager_max_steps 1; a premise of 0 (0.5.23's rule) is another build: the record says so (`run`'s exit
    code is the outcome's: 1 for the crash either way; compare and pytest fail on the expectation)."""
    path = _with_premise(tmp_path, f"    profile: {{eager_max_steps: {steps}}}\n")
    res = run_cli("run", path, "--case", "tokens=276,path=eager", "--build", "before", "--reference",
                  "--out", tmp_path / "out")
    (result,) = (tmp_path / "out").rglob("result.json")
    record = json.loads(result.read_text())
    assert record["outcome"] == "crash" and record["build"]["profile"]["eager_max_steps"] == 1
    assert record["expectation"]["held"] is held, record["expectation"]
    assert res.returncode == 1, res.stdout + res.stderr
    if not held:
        assert record["expectation"]["premise"] == \
            "the build's profile says eager_max_steps=1, the scenario expects 0"
