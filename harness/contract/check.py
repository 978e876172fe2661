"""Check :data:`harness.contract.facts.FACTS` against one installed sglang's sources: which facts no longer hold.

For a release the contract cites (0.5.14, 0.5.15) every citation must be on its line (or absent where
its line is None), as ``tests/test_contract.py`` checks. For any other release lines move, so a
citation holds when its text is on some line of its file. A citation absent in one cited release is
version-specific by nature (the fix marker; 0.5.14's unguarded SWA refill): for another release it is
expected as in the nearer cited release (absent before 0.5.15 when 0.5.14 lacks it, absent from
0.5.15 on when 0.5.15 lacks it), and a drift says so. A citation's line reworded in a later release
without a change of behaviour (:class:`harness.contract.facts.Later`, read in that release's wheel) is looked
for in its new wording from that release on; a release whose version cannot be read (a source checkout
without metadata) may hold any of the wordings.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from harness.contract.facts import FACTS, VERSIONS, Cite, Fact, Later
from harness.util.bounded_read import read_bytes
from harness.util.errors import InfraError

__all__ = ["Drift", "applies", "check_package", "contract_table", "sglang_package_of", "wordings"]

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


def wordings(cite: Cite, version: str) -> tuple[Later, ...]:
    """The (file, text) forms ``cite`` may take in ``version``: its own in a cited release or before any
    :class:`Later`; the last ``Later`` reached otherwise; every form when ``version`` cannot be read."""
    own = Later(VERSIONS[0], cite.text, cite.file)
    if version in VERSIONS or not cite.later:
        return (own,)
    try:
        v = Version(version)
    except InvalidVersion:
        return (own, *(dataclasses.replace(w, file=w.file or cite.file) for w in cite.later))
    reached = [w for w in cite.later if Version(w.since) <= v]
    if not reached:
        return (own,)
    last = reached[-1]
    return (Later(last.since, last.text, last.file or cite.file),)


def _check_cite(fact: Fact, cite: Cite, package: Path, version: str) -> Drift | None:
    expect, scope = applies(cite, version)
    drift: Drift | None = None
    for form in wordings(cite, version):
        drift = _check_form(fact, form.file or cite.file, form.text, package, expect, scope)
        if drift is None:
            return None
    return drift


def _check_form(fact: Fact, file: str, text: str, package: Path, expect: int | None | bool, scope: str) -> Drift | None:
    path = package / file
    if not path.is_file():
        if expect is None:
            return None
        return Drift(fact.name, file, "file", text, (), scope or "the file is missing")
    lines = read_bytes(path, "source").decode("utf-8", errors="replace").splitlines()
    found = tuple(i + 1 for i, line in enumerate(lines) if text in line)
    if expect is None:
        return Drift(fact.name, file, "absent", text, found, scope) if found else None
    if expect is True:
        return None if found else Drift(fact.name, file, "some line", text, found, scope)
    assert isinstance(expect, int)
    ok = expect <= len(lines) and text in lines[expect - 1]
    return None if ok else Drift(fact.name, file, f"line {expect}", text, found, scope)


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


def contract_table(packages: Mapping[str, Path]) -> str:
    """The README's fact x release table (markdown) for the ``sglang`` packages of ``packages`` (version -> dir),
    in the order given: "yes" where every citation of the fact holds, "no" where one does not."""
    versions = list(packages)
    failed = {v: {d.fact for d in check_package(packages[v], v)[0]} for v in versions}
    rows = ["| fact | " + " | ".join(versions) + " |", "|---|" + "---|" * len(versions)]
    for fact in FACTS:
        rows.append(f"| `{fact.name}` | " + " | ".join("no" if fact.name in failed[v] else "yes" for v in versions) + " |")
    rows.append("| **all hold** | " + " | ".join(f"no ({len(failed[v])})" if failed[v] else "**yes**" for v in versions)
                + " |")
    return "\n".join(rows)
