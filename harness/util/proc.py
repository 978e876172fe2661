"""Child commands the harness waits for (not servers): each bounded in time, in its own process group.

:func:`run_bounded` runs one to completion, killing its whole group when the bound is reached (a probe that
hangs, a pip install that stalls). Git is the command asked most, so its helpers live here too: the build
resolver, the bisection and its demo repository all ask git the same way.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.util.errors import InfraError
from harness.util.kill import signal_group
from harness.util.text import last_line

__all__ = ["GIT_TIMEOUT_S", "commit_of", "git", "is_ancestor", "run_bounded"]

GIT_TIMEOUT_S = 120.0


def run_bounded(
    argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run argv in its own process group; on timeout kill the whole group and raise InfraError."""
    full_env = None if env is None else {**os.environ, **env}
    proc = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=full_env,
        cwd=cwd,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        signal_group(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise InfraError(f"{' '.join(argv[:4])} ... took longer than {timeout:.0f} s") from None
    finally:
        if proc.poll() is None:
            signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


def git(repo: Path, *args: str, check: bool = True, timeout: float = GIT_TIMEOUT_S,
        env: Mapping[str, str] | None = None) -> str:
    """``git -C repo args`` (argv, never a shell), ``env`` laid over ours; stdout stripped. InfraError when it
    takes longer than ``timeout``, or fails and ``check``."""
    done = run_bounded(["git", "-C", str(repo), *args], timeout=timeout, env=env)
    if check and done.returncode != 0:
        raise InfraError(f"git {' '.join(args)} in {repo} failed: {last_line(done.stderr)}")
    return done.stdout.strip()


def commit_of(repo: Path, rev: str) -> str | None:
    """The full commit id ``rev`` names in ``repo``, or None when it names none."""
    done = run_bounded(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                       timeout=GIT_TIMEOUT_S)
    found = done.stdout.strip() if done.returncode == 0 else ""
    return found or None


def is_ancestor(repo: Path, old: str, new: str) -> bool:
    """Whether commit ``old`` is an ancestor of (or is) ``new``."""
    return run_bounded(["git", "-C", str(repo), "merge-base", "--is-ancestor", old, new],
                       timeout=GIT_TIMEOUT_S).returncode == 0
