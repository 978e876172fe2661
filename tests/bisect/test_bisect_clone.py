"""Issue 24, item 5: the bisect state lives outside the user's ``.git``, and what a bisect killed together with
its guard leaves is found and removed by the next bisect of that repository (or ``bisect --cleanup``).

Real git and real processes: a child process opens a bisect's temporary clone (with its guard) and starts a
``git bisect`` in it, then the child and its guard are SIGKILLed together, as a CI cancel of the whole
cgroup does. The user's repository (every byte of it, ``.git`` included) is as it was; the clone is left
in the temporary directory until the next bisect of that repository removes it, never a live one's and
never another repository's.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from harness.bisect.worktree import BisectWorktree, clean_stale
from harness.cli import main
from tests.checkout_digest import checkout_digest
from tests.helpers import GIT_IDENTITY, git
from tests.process_marks import command_line

REPO_ROOT = Path(__file__).resolve().parents[2]
_ENV = {**os.environ, **GIT_IDENTITY}


def _repo(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q")
    for i in range(4):
        (path / "f").write_text(str(i))
        git(path, "add", "f")
        git(path, "commit", "-qm", f"c{i}")
    return path


_CHILD = """
import sys
from pathlib import Path
from harness.bisect.worktree import BisectWorktree
import subprocess
wt = BisectWorktree(Path(sys.argv[1]), sys.argv[2], tag="bisect-clone-test")
subprocess.run(["git", "-C", str(wt.path), "bisect", "start", "HEAD", "HEAD~3"], check=True, capture_output=True)
print(wt.path, flush=True)
sys.stdin.read()  # until killed
"""


def _killed_bisect(repo: Path, before: str) -> Path:
    """A bisect (in a child) and its guard SIGKILLed together mid-bisect; the tree of its clone."""
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(repo), git(repo, "rev-parse", "HEAD")],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                             env={**_ENV, "PYTHONPATH": str(REPO_ROOT)})
    try:
        assert child.stdout is not None
        tree = Path(child.stdout.readline().strip())
        assert (tree / ".git" / "BISECT_LOG").is_file() and (tree / ".git" / "refs" / "bisect").is_dir()
        assert checkout_digest(repo) == before, "the bisect state is in the user's .git"
        guards = [p for p in psutil.Process(child.pid).children() if "harness.bisect.guard" in command_line(p)]
        assert len(guards) == 1
        for proc in (guards[0], psutil.Process(child.pid)):  # the whole cgroup at once: nobody cleans up
            proc.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        guards[0].wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
    return tree


def test_a_bisect_killed_with_its_guard_leaves_the_users_git_as_it_was(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    repo = _repo(tmp_path / "repo")
    other = _repo(tmp_path / "other")
    before = checkout_digest(repo)
    tree = _killed_bisect(repo, before)
    time.sleep(0.2)
    assert tree.is_dir(), "nothing removed it: the guard died with the harness"
    assert checkout_digest(repo) == before, "a killed bisect left something in the user's repository"
    live = BisectWorktree(other, git(other, "rev-parse", "HEAD"), tag="live")  # another repository's, alive
    try:
        assert clean_stale(other) == [], "another repository's stale clone is not this one's to remove"
        assert tree.is_dir()
        assert main(["bisect", "--cleanup", "--repo", str(repo)]) == 0
        assert "1 stale bisect worktree(s) removed" in capsys.readouterr().out
        assert not tree.parent.exists()
        assert live.path.is_dir(), "a live bisect's clone is never removed"
    finally:
        live.close()
    assert not live.path.parent.exists()
    assert checkout_digest(repo) == before


def test_a_legacy_worktree_and_the_packed_refs_its_bisect_made_are_removed(tmp_path: Path) -> None:
    """Before the clone, a linked worktree: its bisect left ``.git/worktrees/<name>`` (``BISECT_*``,
    ``refs/bisect/*``) and an empty ``.git/packed-refs`` in the user's repository."""
    repo = _repo(tmp_path / "repo")
    assert not (repo / ".git" / "packed-refs").exists()
    before = checkout_digest(repo)
    tree = Path(tempfile.mkdtemp(prefix="sglang-repro-bisect-")) / "tree"
    git(repo, "worktree", "add", "--detach", str(tree), "HEAD")
    git(tree, "bisect", "start", "HEAD", "HEAD~2")
    (tree.parent / "session.lock").write_text("")  # its owner is dead: nobody holds the lock
    packed = repo / ".git" / "packed-refs"
    if not packed.exists():  # git versions differ in whether bisect start makes it; make it as 2.39 does
        packed.write_text("# pack-refs with: peeled fully-peeled sorted \n")
    held = os.open(tree.parent / "session.lock", os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        assert clean_stale(repo) == [], "alive: kept"
    finally:
        os.close(held)
    assert clean_stale(repo) == [str(tree)]
    assert not tree.parent.exists() and not packed.exists()
    assert checkout_digest(repo) == before


def test_the_next_bisect_of_the_repository_removes_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _repo(tmp_path / "repo")
    before = checkout_digest(repo)
    tree = _killed_bisect(repo, before)
    assert tree.is_dir()
    nxt = BisectWorktree(repo, git(repo, "rev-parse", "HEAD~1"), tag="next")
    try:
        assert not tree.parent.exists()
        assert f"removed what an earlier, killed bisect of {repo} left: {tree}" in capsys.readouterr().err
    finally:
        nxt.close()
    assert checkout_digest(repo) == before
