"""A digest of a git checkout that changes if anything in it does: every byte of the tree, .git included, plus
what git says of it (status, worktrees, refs, HEAD). Tests that promise to leave a user's checkout untouched
(bisect, a killed bisect, a double signal) compare it before and after."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

__all__ = ["checkout_digest"]


def checkout_digest(repo: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(repo.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(repo)).encode())
            digest.update(path.read_bytes())
    # --no-optional-locks: the check itself must not refresh the index (git status may rewrite it)
    for args in (["status", "--porcelain"], ["worktree", "list"], ["for-each-ref"], ["symbolic-ref", "HEAD"]):
        digest.update(subprocess.run(["git", "--no-optional-locks", "-C", str(repo), *args], capture_output=True,
                                     check=False).stdout)
    return digest.hexdigest()
