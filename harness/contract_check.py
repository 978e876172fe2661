"""Check :data:`harness.contract.FACTS` against one installed sglang's sources: which facts no longer hold.

For a release the contract cites (0.5.14, 0.5.15) every citation must be on its line (or absent where
its line is None), as ``tests/test_contract.py`` checks. For any other release lines move, so a
citation holds when its text is on some line of its file. A citation absent in one cited release is
version-specific by nature (the fix marker; 0.5.14's unguarded SWA refill): for another release it is
expected as in the nearer cited release (absent before 0.5.15 when 0.5.14 lacks it, absent from
0.5.15 on when 0.5.15 lacks it), and a drift says so.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from harness.contract import FACTS, VERSIONS, Cite, Fact
from harness.errors import InfraError

__all__ = ["Drift", "applies", "check_package", "sglang_package_of"]

_FIND = (
    "import importlib.util, json, sys; s = importlib.util.find_spec('sglang'); "
    "print(json.dumps({'pkg': list(s.submodule_search_locations)[0] if s else None}))"
)


@dataclass(frozen=True)
class Drift:
    """One citation of ``fact`` that does not hold in the checked sources, and why."""

    fact: str
    file: str
    expected: str  # "line N", "some line", "absent"
    text: str
    found: tuple[int, ...]
    scope: str = ""  # for a version-specific citation: the releases it applies to

    def describe(self) -> str:
        where = f"sglang/{self.file}" + (f":{self.expected[5:]}" if self.expected.startswith("line ") else "")
        seen = f"found at {', '.join(map(str, self.found))}" if self.found else "found nowhere"
        if self.expected == "file":
            seen = "no such file"
        verb = "should not hold" if self.expected == "absent" else "lacks"
        scope = f"; {self.scope}" if self.scope else ""
        return f"{self.fact}: {where} {verb} {self.text!r} ({seen}{scope})"


def applies(cite: Cite, version: str) -> tuple[int | None | bool, str]:
    """What ``cite`` expects of ``version``: a line number (a cited release), True (some line),
    None (absent); and the scope of a version-specific citation ('' otherwise)."""
    if version in VERSIONS:
        return cite.line(version), ""
    lines = {v: cite.line(v) for v in VERSIONS}
    if all(line is not None for line in lines.values()):
        return True, ""
    try:
        v = Version(version)
    except InvalidVersion:
        v = Version(VERSIONS[-1])
    first, last = Version(VERSIONS[0]), Version(VERSIONS[-1])
    if lines[VERSIONS[0]] is None:
        scope = f"present from {VERSIONS[-1]} on"
        return (True if v >= last else None), scope
    scope = f"present up to {VERSIONS[0]}"
    return (True if v <= first else None), scope


def _check_cite(fact: Fact, cite: Cite, package: Path, version: str) -> Drift | None:
    path = package / cite.file
    expect, scope = applies(cite, version)
    if not path.is_file():
        if expect is None:
            return None
        return Drift(fact.name, cite.file, "file", cite.text, (), scope or "the file is missing")
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    found = tuple(i + 1 for i, line in enumerate(lines) if cite.text in line)
    if expect is None:
        return Drift(fact.name, cite.file, "absent", cite.text, found, scope) if found else None
    if expect is True:
        return None if found else Drift(fact.name, cite.file, "some line", cite.text, found, scope)
    assert isinstance(expect, int)
    ok = expect <= len(lines) and cite.text in lines[expect - 1]
    return None if ok else Drift(fact.name, cite.file, f"line {expect}", cite.text, found, scope)


def check_package(package: Path, version: str) -> tuple[list[Drift], int]:
    """Every drift of the contract in the ``sglang`` package at ``package``, and how many facts were checked."""
    drifts = [d for fact in FACTS for cite in fact.cites if (d := _check_cite(fact, cite, package, version))]
    return drifts, len(FACTS)


def sglang_package_of(python: str) -> Path:
    """The ``sglang`` package directory the interpreter ``python`` imports; InfraError if it has none."""
    try:
        done = subprocess.run([python, "-c", _FIND], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InfraError(f"{python} could not be asked where sglang is: {exc}") from None
    if done.returncode != 0:
        raise InfraError(f"{python} could not be asked where sglang is: {done.stderr.strip()[-300:]}")
    pkg = json.loads(done.stdout or "{}").get("pkg")
    if not pkg:
        raise InfraError(f"{python} has no sglang package")
    return Path(pkg)
