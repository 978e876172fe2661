"""The tests' shared helpers, each defined once (issue 31): a free port, git in a test repository, the cited
files of a release.

A port comes from the harness's own lease (:func:`harness.server.lease.lease_port`), held until the test
process ends: a bare ``bind(0)``-and-close hands out a port that a server started by another test (or another
worker) can take before this one binds it.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
from pathlib import Path

from harness.contract import facts as contract
from harness.server.lease import PortLease, lease_port

__all__ = ["GIT_IDENTITY", "copy_cited", "free_port", "git"]

_LEASES: list[PortLease] = []
# A fixed author and committer: a test repository's commits never depend on the machine's git configuration.
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x.invalid", "GIT_COMMITTER_NAME": "t",
                "GIT_COMMITTER_EMAIL": "t@x.invalid"}


def free_port(host: str = "127.0.0.1") -> int:
    """A port on ``host`` that nothing listens on and no harness run or other test holds, until this process ends."""
    lease = lease_port(host)
    if not _LEASES:
        atexit.register(_release_all)
    _LEASES.append(lease)
    return lease.port


def _release_all() -> None:
    for lease in _LEASES:
        lease.release()


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """``git -C repo args`` with :data:`GIT_IDENTITY` (``env`` laid over the environment instead, when given),
    bounded; an AssertionError with git's message when it fails; stdout stripped."""
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=60,
                          env=env if env is not None else {**os.environ, **GIT_IDENTITY}, check=False)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr.strip()}"
    return done.stdout.strip()


def copy_cited(package: Path, dest: Path) -> Path:
    """The files the contract facts cite, copied from an unpacked release ``package`` into ``dest``; a file cited
    for the other release only is skipped."""
    for name in contract.cited_files():
        if not (package / name).is_file():
            continue
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(package / name, dest / name)
    return dest
