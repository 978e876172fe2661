"""Bounded child commands and the git helpers, on real processes and a real repository."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from harness.util.errors import InfraError
from harness.util.proc import commit_of, git, is_ancestor, run_bounded

_IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
             "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_command_past_its_bound_is_killed_with_its_children(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    with pytest.raises(InfraError, match="took longer than 1 s"):
        run_bounded(["sh", "-c", f"sleep 30 & echo $! > {pid_file}; wait"], timeout=1)
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def test_git_answers_about_commits_and_names_what_failed(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    commits = []
    for name in ("a", "b"):
        (repo / name).write_text(name)
        git(repo, "add", name)
        git(repo, "commit", "-q", "-m", name, env=_IDENTITY)
        commits.append(git(repo, "rev-parse", "HEAD"))
    first, second = commits
    assert commit_of(repo, "HEAD") == second
    assert commit_of(repo, first[:8]) == first
    assert commit_of(repo, "no-such-rev") is None
    assert is_ancestor(repo, first, second) and not is_ancestor(repo, second, first)
    with pytest.raises(InfraError, match=r"^git checkout no-such-rev in .* failed: "):
        git(repo, "checkout", "no-such-rev")
    assert git(repo, "checkout", "no-such-rev", check=False) == ""
