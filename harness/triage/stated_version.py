"""What a text says about the sglang release it ran, and what that means for a known bug's fix.

A paste names its release in a few ways: a version line (``sglang: 0.5.13.post1`` from ``python -m sglang.check_env``,
``sglang==0.5.13``, ``pip show``'s ``Name: sglang`` / ``Version:``, ``sglang 0.5.13``), an image tag
(``lmsysorg/sglang:v0.5.13``), a ``site-packages/sglang-0.5.13.dist-info`` path; and its frames' file:line, which
:mod:`harness.triage.release_frames` fits to releases. Paths under ``site-packages``/``dist-packages`` say an
installed wheel; a ``.../python/sglang/srt`` path says a source checkout (the Docker images install that way too).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from harness.signatures.catalogue import Fix

__all__ = ["StatedVersion", "fix_verdict", "stated_version"]

_V = r"v?(\d+\.\d+\.\d+(?:\.post\d+|rc\d+|\.dev\d+)?)"
_VERSION_LINES = (
    re.compile(r"\bsglang\s*(?:==|:|\s+version[:\s]\s*|\s+v(?=\d)|\s+(?=\d))\s*" + _V + r"\b", re.IGNORECASE),
    re.compile(r"\bsglang[:/]" + _V + r"\b"),  # an image tag, lmsysorg/sglang:v0.5.13
    re.compile(r"\bsglang-" + _V + r"(?:\.dist-info|\.egg-info|-py3|-cp\d)"),  # an installed wheel's metadata
)
_PIP_SHOW = re.compile(r"^Name:\s*sglang\s*$\s*^Version:\s*" + _V, re.IGNORECASE | re.MULTILINE)
_SGLANG = re.compile("sglang", re.IGNORECASE)
_INSTALLED = re.compile(r"(?:site|dist)-packages[/\\]sglang[/\\]")
_CHECKOUT = re.compile(r"[/\\]python[/\\]sglang[/\\]srt[/\\]")


@dataclass(frozen=True)
class StatedVersion:
    """The release a text names (None: it names none) and where it said so."""

    version: str | None
    where: str  # "--version", "line N: <text>", or why none
    installed: bool  # frames under site-packages/dist-packages
    checkout: bool  # frames under .../python/sglang/srt (a source checkout)


def stated_version(text: str, given: str | None = None) -> StatedVersion:
    """``given`` (``--version``) if set, else the first version the text states."""
    installed = _INSTALLED.search(text) is not None
    checkout = _CHECKOUT.search(text) is not None
    if given:
        return StatedVersion(_canonical(given) or given, "--version", installed, checkout)
    m = _PIP_SHOW.search(text)
    if m is not None and _canonical(m.group(1)):
        return StatedVersion(_canonical(m.group(1)), f"line {_line_of(text, m.start())}: pip show", installed, checkout)
    for pattern in _VERSION_LINES:
        for start, line in _lines_naming_sglang(text):
            for m in pattern.finditer(line):
                version = _canonical(m.group(1))
                if version is not None:
                    return StatedVersion(version, f"line {_line_of(text, start)}: {m.group(0).strip()}",
                                         installed, checkout)
    return StatedVersion(None, "the text names no sglang release", installed, checkout)


def _lines_naming_sglang(text: str) -> Iterator[tuple[int, str]]:
    """(offset, line) of each line that says "sglang" (one literal search over the text, no copy of it)."""
    end = -1
    for m in _SGLANG.finditer(text):
        if m.start() < end:
            continue  # the line was given already
        start = text.rfind("\n", 0, m.start()) + 1
        end = text.find("\n", m.start())
        end = len(text) if end == -1 else end
        yield start, text[start:end]


def fix_verdict(fix: Fix, releases: tuple[str, ...], how: str) -> str:
    """The sentence a maintainer wants: is the bug fixed in the release(s) the text ran (``how``: how we know)."""
    pr = _pr_label(fix.pr)
    fixed = Version(fix.version)
    known = [r for r in releases if _canonical(r) is not None]
    if not known:
        return f"known bug, fixed in {fix.version} ({pr}); the release is not known ({how}): pass --version"
    before = [r for r in known if Version(r) < fixed]
    after = [r for r in known if Version(r) >= fixed]
    if before and not after:
        lack = " and ".join(before) if len(before) <= 2 else ", ".join(before[:-1]) + " and " + before[-1]
        verb = "lacks" if len(before) == 1 else "lack"
        return f"known bug, fixed in {fix.version} ({pr}); {lack} {verb} the fix ({how})"
    if after and not before:
        have = " and ".join(after) if len(after) <= 2 else f"{after[0]} ... {after[-1]}"
        return (f"{have} {'has' if len(after) == 1 else 'have'} the fix ({fix.version}, {pr}): "
                f"a regression or a new bug ({how})")
    return (f"known bug, fixed in {fix.version} ({pr}); {', '.join(before)} lack the fix, "
            f"{', '.join(after)} have it ({how})")


def _pr_label(url: str) -> str:
    m = re.search(r"/pull/(\d+)", url)
    return f"PR #{m.group(1)}" if m else url


def _canonical(text: str) -> str | None:
    try:
        return str(Version(text))
    except InvalidVersion:
        return None


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1
