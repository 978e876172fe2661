"""Bisecting released packages: versions in order, one cached environment per release, then the tags.

The versions come from ``--versions`` or from the package index (``pip index versions sglang``,
pip's own client), ordered by PEP 440 and cut to ``A..B`` inclusive. The search is a binary search
with git's skip rule: an untestable release is set aside and the nearest untested one to the
middle is tried. Each release's build comes from a template (default ``pip:sglang=={version}``, an
environment created once per version under the harness's cache). The pair found (last old, first
new) names the tags (``v{version}`` or ``{version}``) between which the commits are searched next.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from harness.bisect.probe import StepRecord, progress
from harness.util.errors import InfraError, UserError
from harness.util.proc import run_bounded

__all__ = [
    "ReleaseSearch",
    "order_versions",
    "parse_range",
    "search_releases",
    "tag_for",
    "versions_from_index",
]


def parse_range(text: str) -> tuple[str, str]:
    low, sep, high = text.partition("..")
    if not sep or not low.strip() or not high.strip():
        raise UserError(f"--releases {text!r}: expected A..B, e.g. 0.5.10..0.5.20")
    return low.strip(), high.strip()


def _version(text: str, where: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        raise UserError(f"{where}: {text!r} is not a version (PEP 440, e.g. 0.5.14)") from None


def order_versions(versions: Sequence[str], low: str, high: str, *, where: str = "--versions") -> list[str]:
    """The versions from ``low`` to ``high`` inclusive, ordered; both ends must be among them."""
    lo, hi = _version(low, "--releases"), _version(high, "--releases")
    if lo >= hi:
        raise UserError(f"--releases {low}..{high}: {low} is not older than {high}")
    parsed = sorted({_version(v, where): v for v in versions}.items())
    chosen = [text for v, text in parsed if lo <= v <= hi]
    for end in (low, high):
        if not any(_version(c, where) == _version(end, "--releases") for c in chosen):
            raise UserError(f"--releases: {end} is not among the released versions ({where}: "
                            f"{', '.join(t for _, t in parsed) or 'none'})")
    return chosen


def versions_from_index(package: str = "sglang", *, python: str | None = None, timeout_s: float = 120) -> list[str]:
    """The versions the package index has, through pip (``pip index versions``)."""
    argv = [python or sys.executable, "-m", "pip", "index", "versions", package, "--disable-pip-version-check"]
    try:
        done = run_bounded(argv, timeout=timeout_s)  # pip's own children go with it on a timeout
    except InfraError:
        raise InfraError(f"the package index did not answer within {timeout_s:.0f} s (pip index versions "
                         f"{package}); give --versions") from None
    found = re.search(r"^Available versions:\s*(.+)$", done.stdout, re.MULTILINE)
    if done.returncode != 0 or not found:
        last = (done.stderr.strip().splitlines() or ["no answer"])[-1]
        raise InfraError(f"cannot list {package} releases from the package index: {last}; give --versions")
    return [v.strip() for v in found.group(1).split(",") if v.strip()]


def tag_for(version: str, tags: Sequence[str]) -> str | None:
    for name in (f"v{version}", version, f"sglang-v{version}"):
        if name in tags:
            return name
    return None


@dataclass(frozen=True)
class ReleaseSearch:
    last_old: str | None
    first_new: str | None
    candidates: tuple[str, ...]  # when skipped releases were left between them
    steps: tuple[StepRecord, ...]


def search_releases(versions: Sequence[str], judge: Callable[[str, int], StepRecord], *,
                    is_new: Callable[[StepRecord], bool], started: float) -> ReleaseSearch:
    """Binary search between versions[0] (old, verified) and versions[-1] (new, verified)."""
    lo, hi = 0, len(versions) - 1
    skipped: set[int] = set()
    steps: list[StepRecord] = []
    while True:
        inside = [i for i in range(lo + 1, hi) if i not in skipped]
        if not inside:
            break
        mid = (lo + hi) / 2
        i = min(inside, key=lambda j: (abs(j - mid), j))
        progress(f"release step {len(steps) + 1}: testing {versions[i]}  (elapsed {time.time() - started:.0f}s)")
        record = judge(versions[i], len(steps) + 1)
        steps.append(record)
        progress(f"release {versions[i]} is {record.term} ({record.reason})")
        if record.term == "skip":
            skipped.add(i)
        elif is_new(record):
            hi = i
        else:
            lo = i
    between = tuple(versions[j] for j in range(lo + 1, hi))
    if between:
        return ReleaseSearch(None, None, (*between, versions[hi]), tuple(steps))
    return ReleaseSearch(versions[lo], versions[hi], (), tuple(steps))
