"""The temporary clone a bisection runs in, so the user's checkout, branch and ``.git`` never move.

``git clone --shared --no-checkout`` makes a second repository of the user's in a temporary folder:
it borrows the user's objects (``objects/info/alternates``, nothing copied) and writes nothing into
the user's ``.git``. ``git bisect`` keeps all its state (``refs/bisect/*``, ``BISECT_*``, the
``packed-refs`` that ``git bisect start`` creates) in the clone, so a search killed in any way leaves
the user's repository byte for byte as it was; only the temporary folder is left, and the next bisect
of that repository (or ``bisect --cleanup``) removes it. (Earlier versions used a linked worktree,
whose bisect state git keeps in the user's ``.git/worktrees/<name>/``: :func:`clean_stale` still
removes those.) Before the clone exists a guard process (``python -m harness.bisect.guard``) is started
holding a pipe only this process writes: if the harness dies, even by SIGKILL, the guard ends the
search's processes and removes the folder.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from harness.util.atomic import write_atomic
from harness.util.bounded_read import ReadRefused, read_text
from harness.util.errors import UserError
from harness.util.kill import release_watcher
from harness.util.proc import commit_of, git

__all__ = ["BisectWorktree", "clean_stale", "layout_of", "remove_tree", "resolve_commit"]

_PREFIX = "sglang-repro-bisect-"
_LOCK = "session.lock"  # held (flock) by the bisect that owns the worktree beside it, for its whole life
# Whose folder it is (the repository's object store), written under the lock before the clone exists: a folder
# with a free lock and no clone is also what a guard leaves for a moment while it removes a killed bisect's
# clone, so "no clone yet" alone must never make another repository's folder look like this one's.
_ORIGIN = "origin"

PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent


def resolve_commit(repo: Path, rev: str, flag: str) -> str:
    """The full commit id of ``rev``; UserError naming the flag when it is not a commit of ``repo``."""
    commit = commit_of(repo, rev)
    if commit is None:
        raise UserError(f"{flag} {rev}: not a commit of {repo}")
    return commit


def layout_of(repo: Path, commit: str) -> str:
    """``sglang`` (has python/sglang/) or ``sglang-repro`` (has harness/sim/) at ``commit``."""
    for path, kind in (("python/sglang", "sglang"), ("harness/sim", "sglang-repro")):
        if git(repo, "cat-file", "-t", f"{commit}:{path}", check=False) == "tree":
            return kind
    raise UserError(f"--repo {repo}: at {commit[:12]} it has neither python/sglang/ (an SGLang checkout) "
                    "nor harness/sim/ (a checkout of sglang-repro)")


class BisectWorktree:
    """A guarded temporary linked worktree of ``repo``; ``close()`` (or the guard) removes it."""

    def __init__(self, repo: Path, commit: str, *, tag: str) -> None:
        self.repo = repo
        self.tag = tag
        for stale in clean_stale(repo):  # what an earlier bisect left when it and its guard were killed together
            sys.stderr.write(f"bisect: removed what an earlier, killed bisect of {repo} left: {stale}\n")
        self.path = Path(tempfile.mkdtemp(prefix=_PREFIX)) / "tree"
        # The lock tells a later bisect this clone is alive; the kernel drops it when this process dies.
        self._lock_fd: int | None = os.open(self.path.parent / _LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        write_atomic(self.path.parent / _ORIGIN, str(_objects(repo)))
        env = {k: v for k, v in os.environ.items() if k != "SGLANG_REPRO_RUN"}  # never reap itself
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH")) if p)
        env["PYTHONSAFEPATH"] = "1"
        self._guard: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, "-m", "harness.bisect.guard", "--tag", tag, "--repo", str(repo), "--tree", str(self.path)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
            start_new_session=True,  # Ctrl-C in the terminal must not kill the guard
        )
        try:
            # --shared: the user's objects are borrowed, not copied (a big SGLang history clones in a second);
            # the commits are then there whether or not a ref of the user's names them.
            git(repo, "clone", "--quiet", "--shared", "--no-checkout", str(repo.absolute()), str(self.path))
            git(self.path, "checkout", "--quiet", "--detach", commit)
        except BaseException:
            self.close()
            raise

    def tell_guard(self, line: str) -> None:
        guard = self._guard
        if guard is None or guard.stdin is None:
            return
        try:
            guard.stdin.write(line.encode() + b"\n")
            guard.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def checkout(self, commit: str) -> None:
        git(self.path, "checkout", "--quiet", "--detach", "--force", commit)
        git(self.path, "clean", "-fdxq")

    def head(self) -> str:
        return git(self.path, "rev-parse", "HEAD")

    def close(self) -> None:
        """Remove the clone and its temporary folder; then stop the guard quietly."""
        remove_tree(self.path)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        guard = self._guard
        if guard is not None:
            self.tell_guard("disarm")
            self._guard = None
            release_watcher(guard, timeout_s=10)

    def __enter__(self) -> BisectWorktree:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        from harness.util.interrupts import Shield

        # A signal during the removal waits for it (the clone never outlives the harness half removed); it
        # interrupts afterwards unless an interrupt is already on its way out.
        with Shield(reraise=et is None):
            self.close()


def _is_alive(folder: Path) -> bool:
    """True while the bisect that made ``folder`` still holds its lock."""
    try:
        fd = os.open(folder / _LOCK, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False  # no lock file: a bisect of an older harness, or its folder is gone: not alive
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def clean_stale(repo: Path) -> list[str]:
    """Remove what an earlier bisect of ``repo`` left when it and its guard were SIGKILLed together (a CI cancel
    of the whole cgroup), never one whose bisect still holds its lock. The paths removed.

    - its temporary clone: a ``sglang-repro-bisect-*`` folder in the temporary directory whose clone borrows
      ``repo``'s objects (nothing of it is in ``repo``);
    - from earlier versions, a linked worktree registered in ``repo``: its folder, and its ``refs/bisect/*``
      and ``BISECT_*`` files, which live in ``.git/worktrees/<name>/``; and the ``packed-refs`` that
      ``git bisect start`` created in the shared ``.git`` when it still holds no reference (git reads such a
      file as no file at all).
    """
    removed = [str(tree) for tree in _stale_clones(repo)]
    for tree in removed:
        remove_tree(Path(tree))
    listing = git(repo, "worktree", "list", "--porcelain", check=False) or ""
    legacy = []
    for line in listing.splitlines():
        if not line.startswith("worktree "):
            continue
        path = Path(line.removeprefix("worktree "))
        if path.name != "tree" or not path.parent.name.startswith(_PREFIX) or _is_alive(path.parent):
            continue
        remove_worktree(repo, path)
        legacy.append(str(path))
    if legacy:
        git(repo, "worktree", "prune", check=False)
        _drop_empty_packed_refs(repo)
    return removed + legacy


def _stale_clones(repo: Path) -> list[Path]:
    """The trees of this repository's bisect clones whose bisect is gone (its lock free)."""
    objects = _objects(repo)
    found = []
    for folder in sorted(Path(tempfile.gettempdir()).glob(_PREFIX + "*")):
        if not (folder / _LOCK).is_file() or _is_alive(folder):
            continue  # no lock: not one of ours (or a bisect of an older harness, which may be alive)
        # Either file may be anyone's (the temporary folder is shared): read as a regular file, capped.
        try:
            origin = [read_text(folder / _ORIGIN, "state")]
        except ReadRefused:  # a folder of a harness before the origin file: whose it is, its clone's alternates say
            try:
                origin = read_text(folder / "tree" / ".git" / "objects" / "info" / "alternates", "state").split()
            except ReadRefused:
                origin = []  # nothing says whose it is (killed between its lock and its origin): left alone
        if any(Path(o).resolve() == objects for o in origin):
            found.append(folder / "tree")
    return found


def _common_dir(repo: Path) -> Path:
    """The ``.git`` that ``repo`` and its linked worktrees share."""
    common = Path(git(repo, "rev-parse", "--git-common-dir", check=False) or ".git")
    return common if common.is_absolute() else repo / common


def _objects(repo: Path) -> Path:
    return (_common_dir(repo) / "objects").resolve()


def _drop_empty_packed_refs(repo: Path) -> None:
    packed = _common_dir(repo) / "packed-refs"
    try:
        lines = read_text(packed, "source").splitlines()
    except (OSError, ReadRefused):  # none (git packs refs only when asked), or not a file to touch
        return
    if all(line.startswith("#") for line in lines):
        packed.unlink(missing_ok=True)


def remove_tree(path: Path) -> None:
    """Best effort: a bisect's clone and its temporary parent folder (its lock file with it)."""
    shutil.rmtree(path, ignore_errors=True)
    if path.parent.name.startswith(_PREFIX):
        shutil.rmtree(path.parent, ignore_errors=True)


def remove_worktree(repo: Path, path: Path, new_packed_refs: Path | None = None) -> None:
    """Best effort, every step: a linked worktree of an earlier version, git's registration of it, the
    temporary parent, and ``new_packed_refs`` when git left it holding no reference (only its header line)."""
    git(repo, "worktree", "remove", "--force", "--force", str(path), check=False)
    shutil.rmtree(path, ignore_errors=True)
    git(repo, "worktree", "prune", check=False)
    if path.parent.name.startswith(_PREFIX):
        shutil.rmtree(path.parent, ignore_errors=True)
    if new_packed_refs is not None and new_packed_refs.name == "packed-refs":
        try:
            lines = read_text(new_packed_refs, "source").splitlines()
        except (OSError, ReadRefused):
            return
        if all(line.startswith("#") for line in lines):
            new_packed_refs.unlink(missing_ok=True)


def argv_of_step(state: Path) -> Sequence[str]:
    """The script ``git bisect run`` calls: this harness's step, never the checkout's own ``harness``."""
    return [sys.executable, "-P", "-m", "harness.bisect.step", str(state)]
