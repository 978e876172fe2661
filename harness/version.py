"""The harness's version as runs record it and ``sglang-repro --version`` prints it.

The release (``harness.__version__``, the distribution's version) alone for an installed wheel; with ``+g<commit>``
(a PEP 440 local label) when the package runs from a git checkout, as an editable install does, so a record made
by an unreleased tree names the tree. Looked up once per process.
"""

from __future__ import annotations

import functools
from pathlib import Path

from harness import __version__

__all__ = ["harness_version"]

_GIT_TIMEOUT_S = 10.0


@functools.lru_cache(maxsize=1)
def harness_version() -> str:
    """``0.1.0``, or ``0.1.0+g1a2b3c4d5e6f`` from a git checkout of the harness (its commit, short)."""
    commit = _checkout_commit(Path(__file__).resolve().parent.parent)
    return f"{__version__}+g{commit}" if commit else __version__


def _checkout_commit(folder: Path) -> str | None:
    """The commit checked out in ``folder`` when ``folder`` itself is a git checkout (``.git`` there: an installed
    package's site-packages is never taken for the repository around a virtualenv); None otherwise."""
    if not (folder / ".git").exists():
        return None
    from harness.util.errors import HarnessError
    from harness.util.proc import git

    try:
        commit = git(folder, "rev-parse", "--short=12", "HEAD", check=False, timeout=_GIT_TIMEOUT_S)
    except (HarnessError, OSError):  # no git on PATH, or it hung: the release alone still says what ran
        return None
    return commit if commit and all(c in "0123456789abcdef" for c in commit) else None
