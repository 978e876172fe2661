"""What a bisection says at its end: an unconfirmed answer says why, and its counts agree with its rows."""

from __future__ import annotations

from harness.bisect.oracle import Target, Trial, Verdict
from harness.bisect.probe import StepRecord
from harness.bisect.report import _steps_table
from harness.bisect.run import _commit_summary
from harness.bisect.session import CommitResult, Culprit
from harness.bisect.step import step_of, time_left
from harness.records.outcome import Outcome

SIG = "frozen-kv-mtp-stale-out-cache-loc"
CULPRIT = "c" * 40
PARENT = "p" * 40


def _trial(outcome: str, signature: str | None, server: str) -> Trial:
    return Trial(outcome=Outcome(outcome), signature=signature, reason="", server=server)


def _result(confirm: list[StepRecord]) -> CommitResult:
    return CommitResult(repo="/tmp/demo", layout="sim", good="g" * 40, bad="b" * 40, terms=("good", "bad"),
                        target=Target(signature=SIG),
                        culprit=Culprit(commit=CULPRIT, subject="sim: keep the prefill's out_cache_loc", author="a",
                                        author_date="2026-01-01", files=("harness/sim/__init__.py",), parent=PARENT),
                        candidates=(), confirmed=all(s.extra["held"] for s in confirm), steps=tuple(confirm),
                        bisect_log="", git_output="", commits_in_range=72, expected_steps=6)


def _confirm(revision: str, term: str, expected: str, trials: list[Trial], reason: str) -> StepRecord:
    return StepRecord(kind="confirm", revision=revision, label=revision[:12], verdict=Verdict(term), term=term,
                      reason=reason, trials=tuple(trials), cached=0, elapsed_s=1.0,
                      extra={"expected": expected, "held": term == expected})


def test_an_unconfirmed_culprit_says_which_trials_and_which_other_signature() -> None:
    flaky = [_trial("crash", "cuda-illegal-memory-access", "s1"), _trial("crash", "cuda-illegal-memory-access", "s2")]
    steps = [_confirm(CULPRIT, "bad", "bad", [_trial("crash", SIG, "s0")], f"{SIG} shown"),
             _confirm(PARENT, "skip", "good", flaky, "another signature: cuda-illegal-memory-access")]
    code, status, summary = _commit_summary(_result(steps), prefix="")
    assert (code, status) == (1, "found")
    assert "NOT confirmed by fresh trials: pppppppppppp was skip, expected good" in summary
    assert "trials: crash cuda-illegal-memory-access, crash cuda-illegal-memory-access" in summary


def test_a_confirmed_culprit_says_nothing_more() -> None:
    steps = [_confirm(CULPRIT, "bad", "bad", [_trial("crash", SIG, "s0")], "shown"),
             _confirm(PARENT, "good", "good", [_trial("pass", None, "s1")], "absent")]
    code, _, summary = _commit_summary(_result(steps), prefix="")
    assert code == 0 and summary.endswith("confirmed by fresh trials of it and its parent")


def test_the_steps_table_counts_trials_beside_servers() -> None:
    """Three trials on one shared server: 3 trials, 1 new server, not "1/0" beside three outcomes."""
    shared = [_trial("pass", None, "s1")] * 3
    step = StepRecord(kind="step", revision="d" * 40, label="dddd", verdict=Verdict.GOOD, term="good",
                      reason=f"{SIG} absent in 3 clean trials", trials=tuple(shared), cached=0, elapsed_s=3.0)
    row = _steps_table([step], None)[2]
    assert "| 3 (1, 0) | pass, pass, pass |" in row


def test_the_step_count_never_reads_past_its_estimate() -> None:
    assert step_of(3, 6) == "step 3 of ~6"
    assert step_of(7, 6) == "step 7 (past the ~6 estimated: skips add steps)"


def test_the_time_left_counts_the_steps_expected_and_the_confirmation() -> None:
    # Both endpoints and one step took 90 s (30 s a probe): two more steps and the confirmation are left.
    assert time_left(90.0, 1, 3) == ", ~1:30 left"
    # Past the estimate (skips add steps) only the confirmation is counted, never a negative time.
    assert time_left(300.0, 8, 6) == ", ~0:30 left"
