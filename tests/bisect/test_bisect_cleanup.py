"""Issue 24, item 5: a bisect killed together with its guard leaves a registered worktree (with its
``refs/bisect/*`` and ``BISECT_*`` files) in the user's repository; the next bisect, or ``bisect --cleanup``,
removes it, and never one whose bisect is still alive. Real git, real worktrees."""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from harness.bisect.worktree import BisectWorktree, clean_stale
from harness.cli import main
from tests.helpers import git


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    for i in range(3):
        (repo / "f").write_text(str(i))
        git(repo, "add", "f")
        git(repo, "commit", "-qm", f"c{i}")
    return repo


def _left_behind(repo: Path) -> Path:
    """What a SIGKILLed bisect and guard leave: a worktree in a sglang-repro-bisect- folder, mid-bisect."""
    tree = Path(tempfile.mkdtemp(prefix="sglang-repro-bisect-")) / "tree"
    git(repo, "worktree", "add", "--detach", str(tree), "HEAD")
    git(tree, "bisect", "start", "HEAD", "HEAD~2")
    (tree.parent / "session.lock").write_text("")  # its owner is dead: nobody holds the lock
    return tree


def test_the_next_bisect_or_cleanup_removes_what_a_killed_one_left(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    repo = _repo(tmp_path)
    stale = _left_behind(repo)
    alive = _left_behind(repo)
    fd = os.open(alive.parent / "session.lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # this one's bisect is still running
    try:
        assert len(list((repo / ".git" / "worktrees").iterdir())) == 2
        assert main(["bisect", "--cleanup", "--repo", str(repo)]) == 0
        assert "1 stale bisect worktree(s) removed" in capsys.readouterr().out
        listing = git(repo, "worktree", "list", "--porcelain")
        assert str(stale) not in listing and str(alive) in listing
        assert not stale.parent.exists()
        assert len(list((repo / ".git" / "worktrees").iterdir())) == 1  # its BISECT_* and refs/bisect went with it
    finally:
        os.close(fd)
    assert clean_stale(repo) == [str(alive)]  # its owner gone now: the next bisect cleans it
    assert not (repo / ".git" / "worktrees").exists() or not list((repo / ".git" / "worktrees").iterdir())
    assert git(repo, "status", "--porcelain") == ""  # the user's checkout untouched


def test_a_folder_without_its_clone_is_claimed_only_by_the_repository_it_names(tmp_path: Path) -> None:
    """A free lock and no clone is also what a guard leaves for a moment while it removes another repository's
    killed bisect (seen: two runs side by side, one's cleanup counted the other's folder as its own)."""
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    mine, theirs = _repo(tmp_path / "a"), _repo(tmp_path / "b")
    folders = {}
    for name, repo in (("mine", mine), ("theirs", theirs)):
        with BisectWorktree(repo, git(repo, "rev-parse", "HEAD"), tag=f"cleanup-{name}") as tree:
            folder = tree.path.parent
            shutil.copytree(folder, tmp_path / name, ignore=shutil.ignore_patterns("tree"))
        folders[name] = folder
        shutil.copytree(tmp_path / name, folder)  # what stays of it: lock (free) and origin, no clone
    try:
        assert clean_stale(mine) == [str(folders["mine"] / "tree")]
        assert folders["theirs"].exists() and not folders["mine"].exists()
    finally:
        for folder in folders.values():
            shutil.rmtree(folder, ignore_errors=True)
