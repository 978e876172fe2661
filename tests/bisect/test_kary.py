"""The K-ary search (harness.bisect.kary): property tests against a linear scan and against git's own bisect."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.bisect.kary import NEW, OLD, SKIP, expected_rounds, next_round, result_of, search
from tests.helpers import git


def _history(n: int, first_new: int, skipped: frozenset[int]) -> Callable[[int], str]:
    def oracle(i: int) -> str:
        assert 0 <= i < n - 1, f"the search asked for {i}, outside the untested range of {n}"
        if i in skipped:
            return SKIP
        return NEW if i >= first_new else OLD
    return oracle


histories = st.integers(min_value=1, max_value=300).flatmap(
    lambda n: st.tuples(st.just(n), st.integers(min_value=0, max_value=n - 1)))


@given(histories, st.integers(min_value=1, max_value=8))
def test_monotone_history_without_skips_finds_the_first_new_in_log_k_plus_1_rounds(h: tuple[int, int], k: int) -> None:
    n, first = h
    calls: list[int] = []
    oracle = _history(n, first, frozenset())

    def counted(i: int) -> str:
        calls.append(i)
        return oracle(i)

    result = search(n, k, counted)
    assert result.first_new == first
    assert result.candidates == ()
    assert result.rounds <= expected_rounds(n, k)
    assert len(calls) == len(set(calls)), "a revision was tested twice"


@given(histories, st.integers(min_value=2, max_value=8))
def test_k_ary_gives_binary_search_answer_in_no_more_rounds(h: tuple[int, int], k: int) -> None:
    n, first = h
    oracle = _history(n, first, frozenset())
    binary, kary = search(n, 1, oracle), search(n, k, oracle)
    assert kary.first_new == binary.first_new == first
    assert kary.rounds <= binary.rounds


@given(histories.flatmap(lambda h: st.tuples(st.just(h), st.frozensets(st.integers(0, max(0, h[0] - 2))))),
       st.integers(min_value=1, max_value=6))
def test_skips_never_hide_the_first_new(case: tuple[tuple[int, int], frozenset[int]], k: int) -> None:
    """With skips the answer is the first new revision, or candidates that hold it: every candidate but the
    last was skipped, the last is new, and they are contiguous (what ``git bisect`` says with skips)."""
    (n, first), skipped = case
    skipped = frozenset(i for i in skipped if i < n - 1)
    result = search(n, k, _history(n, first, skipped))
    if result.first_new is not None:
        assert result.first_new == first
        assert first not in skipped
    else:
        cands = result.candidates
        assert first in cands
        assert list(cands) == list(range(cands[0], cands[-1] + 1))
        assert all(c in skipped for c in cands[:-1])
        assert cands[-1] == n - 1 or cands[-1] not in skipped


def test_a_round_splits_the_range_into_k_plus_1_parts() -> None:
    assert next_round(16, {15: NEW}, 3) == (3, 7, 11)
    assert next_round(16, {15: NEW, 3: OLD, 7: NEW}, 3) == (4, 5, 6)
    assert next_round(16, {15: NEW, 3: OLD, 4: OLD, 5: OLD, 6: SKIP, 7: NEW}, 3) == ()
    assert result_of(16, {15: NEW, 3: OLD, 4: OLD, 5: OLD, 6: SKIP, 7: NEW}).candidates == (6, 7)
    with pytest.raises(ValueError, match="at least 1"):
        next_round(16, {}, 0)


def test_an_old_after_a_new_is_resolved_towards_the_first_new() -> None:
    """Judged at once, a flaky revision may answer old after a new one: the earliest new bounds the range."""
    known = {15: NEW, 3: NEW, 7: OLD, 11: OLD}
    assert next_round(16, known, 3) == (0, 1, 2)
    assert result_of(16, {**known, 0: OLD, 1: OLD, 2: OLD}).first_new == 3


@settings(max_examples=6, deadline=None)
@given(case=st.integers(min_value=2, max_value=40).flatmap(
    lambda n: st.tuples(st.just(n), st.integers(0, n - 1), st.frozensets(st.integers(0, n - 2)))),
    k=st.integers(min_value=2, max_value=4))
def test_same_answer_as_git_bisect_run_on_a_real_history(case: tuple[int, int, frozenset[int]], k: int,
                                                         tmp_path_factory: pytest.TempPathFactory) -> None:
    """A linear history of n commits after the good one; git bisect run with the same oracle (a file in each
    commit says old/new/skip) against the K-ary search over ``git rev-list --reverse``."""
    n, first, skipped = case
    repo = tmp_path_factory.mktemp("hist")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    answers = [SKIP if i in skipped and i != n - 1 else NEW if i >= first else OLD for i in range(n)]
    for i, answer in enumerate([OLD, *answers]):
        (repo / "answer").write_text(f"{answer}\n{i}\n")
        git(repo, "add", "answer")
        git(repo, "commit", "-q", "-m", f"c{i}")
    commits = git(repo, "rev-list", "--reverse", "HEAD").split()
    good, revs = commits[0], commits[1:]
    script = "import sys; a = open('answer').read().split()[0]; sys.exit({'old': 0, 'new': 1, 'skip': 125}[a])"
    git(repo, "bisect", "start", revs[-1], good)
    done = subprocess.run(["git", "-C", str(repo), "bisect", "run", sys.executable, "-c", script],
                          capture_output=True, text=True, timeout=120)
    result = search(n, k, lambda i: answers[i])
    if result.first_new is not None:
        assert f"{revs[result.first_new]} is the first bad commit" in done.stdout, done.stdout
    else:
        assert "could be any of" in done.stdout, done.stdout
        assert revs[first] in done.stdout
