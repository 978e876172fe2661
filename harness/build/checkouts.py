"""The source tree of a ``src:`` or ``simsrc:`` build: a checkout as it is, or one commit of it.

With ``@REV`` the commit is checked out once in a linked git worktree under ``<cache>/worktrees/`` (one
per checkout and commit, guarded by a file lock), so the user's checkout never moves.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from harness.build.environments import short_hash
from harness.build.spec import BuildSpec, bad_spec
from harness.util.proc import GIT_TIMEOUT_S, commit_of, git

__all__ = ["source_tree"]


def source_tree(spec: BuildSpec, cache_dir: Path) -> tuple[Path, str]:
    """The tree to run and its commit; UserError when the checkout or the revision is not there."""
    checkout = Path(spec.fields["checkout"]).expanduser().absolute()
    if not checkout.is_dir():
        raise bad_spec(spec.spec, f"checkout {checkout} is not a directory")
    rev = spec.fields.get("rev")
    commit = commit_of(checkout, rev or "HEAD")
    if commit is None:
        raise bad_spec(spec.spec, f"{rev or 'HEAD'} is not a commit of {checkout}")
    if rev is None:
        return checkout, commit
    worktrees = cache_dir / "worktrees"
    worktrees.mkdir(parents=True, exist_ok=True)
    tree = worktrees / f"{checkout.name}-{short_hash(str(checkout))}-{commit[:12]}"
    import filelock

    with filelock.FileLock(str(tree) + ".lock", timeout=GIT_TIMEOUT_S * 2):
        if not (tree / ".git").exists():
            shutil.rmtree(tree, ignore_errors=True)
            git(checkout, "worktree", "prune")
            git(checkout, "worktree", "add", "--detach", "--force", str(tree), commit)
    return tree, commit
