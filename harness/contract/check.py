"""Check :data:`harness.contract.facts.FACTS` against one release's sources: per citation holds / moved / changed /
gone (:mod:`harness.contract.locate`), and which facts drifted.

A release the contract cites (0.5.14, 0.5.15) is compared line for line; any other with the nearer cited release
(older ones with 0.5.14, newer with 0.5.15), so "holds" always means "at the line the reference has it on", and a
text elsewhere in its file is ``moved``, not silently "somewhere". A fact drifts when one of its citations is
``changed`` or ``gone``. The anchor functions come from the reference release's wheel
(:mod:`harness.contract.wheels`), read when it is cached (or ``fetch`` asks for it); without it a missing text is
still reported, as ``gone`` with its function unknown.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.contract.facts import FACTS, Fact, needs
from harness.contract.locate import STATUSES, Located, fact_status, locate, reference_of
from harness.contract.sources import DirSources, Sources
from harness.util.errors import InfraError
from harness.util.proc import run_bounded

__all__ = ["DRIFT", "check_package", "check_sources", "contract_counts", "contract_table", "drifts_of",
           "fact_statuses", "reference_sources", "sglang_package_of"]

# The statuses that mean "the harness can no longer read this through": pre-flight's infra.
DRIFT = ("changed", "gone")

_FIND = (
    "import importlib.util, json, sys; s = importlib.util.find_spec('sglang'); "
    "print(json.dumps({'pkg': list(s.submodule_search_locations)[0] if s else None}))"
)


def reference_sources(version: str, fetch: bool = False) -> Sources | None:
    """The wheel sources of ``version``'s reference release (for anchor functions): from the wheel cache, or
    downloaded when ``fetch``; None when not at hand (pre-flight never waits on a download for a description)."""
    from harness.contract.wheels import WheelSources, cached_wheel

    ref = reference_of(version)
    try:
        if fetch:
            return WheelSources.of(ref)
        wheel = cached_wheel(ref)
        return WheelSources.from_wheel(wheel) if wheel else None
    except InfraError:
        return None


def check_sources(sources: Sources, version: str, reference: Sources | None = None,
                  facts: Sequence[Fact] = FACTS) -> list[Located]:
    """Every citation of ``facts`` located in ``sources`` (release ``version``)."""
    return [locate(fact, cite, sources, version, reference) for fact in facts for cite in fact.cites]


def drifts_of(located: Sequence[Located]) -> list[Located]:
    return [loc for loc in located if loc.status in DRIFT]


def fact_statuses(located: Sequence[Located]) -> dict[str, str]:
    """Each fact's status (its worst citation's), in the contract's order."""
    by_fact: dict[str, list[Located]] = {}
    for loc in located:
        by_fact.setdefault(loc.fact, []).append(loc)
    return {name: fact_status(locs) for name, locs in by_fact.items()}


def contract_counts(located: Sequence[Located], kinds: frozenset[str] | None = None) -> dict[str, int]:
    """How many facts are in each status (only those of ``kinds``, :func:`harness.contract.facts.needs`, if given)."""
    by_name = {f.name: f for f in FACTS}
    statuses = fact_statuses(located)
    counted = Counter(s for name, s in statuses.items() if kinds is None or needs(by_name[name]) in kinds)
    return {status: counted.get(status, 0) for status in STATUSES}


def check_package(package: Path, version: str) -> tuple[list[Located], int]:
    """The drifted citations of the contract in the ``sglang`` package at ``package``, and how many facts were checked."""
    located = check_sources(DirSources(package), version, reference_sources(version))
    return drifts_of(located), len(FACTS)


def sglang_package_of(python: str) -> Path:
    """The ``sglang`` package directory the interpreter ``python`` imports; InfraError if it has none."""
    try:
        done = run_bounded([python, "-c", _FIND], timeout=60)
    except (OSError, InfraError) as exc:
        raise InfraError(f"{python} could not be asked where sglang is: {exc}") from None
    if done.returncode != 0:
        raise InfraError(f"{python} could not be asked where sglang is: {done.stderr.strip()[-300:]}")
    pkg = json.loads(done.stdout or "{}").get("pkg")
    if not pkg:
        raise InfraError(f"{python} has no sglang package")
    return Path(pkg)


def contract_table(results: Mapping[str, Sequence[Located]]) -> str:
    """The fact x release table (markdown) of ``results`` (version -> its located citations), in the order given:
    each fact's status, and per release the counts by status."""
    versions = list(results)
    statuses = {v: fact_statuses(results[v]) for v in versions}
    by_name = {f.name: f for f in FACTS}
    rows = ["| fact | kind | " + " | ".join(versions) + " |", "|---|---|" + "---|" * len(versions)]
    for fact in FACTS:
        rows.append(f"| `{fact.name}` | {needs(by_name[fact.name])} | "
                    + " | ".join(statuses[v].get(fact.name, "?") for v in versions) + " |")
    counts = {v: Counter(statuses[v].values()) for v in versions}
    rows.append("| **counts** | | " + " | ".join(
        ", ".join(f"{counts[v][s]} {s}" for s in STATUSES if counts[v][s]) for v in versions) + " |")
    return "\n".join(rows)
