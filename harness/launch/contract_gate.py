"""Pre-flight's contract check: does the build's sglang still hold the facts this scenario reads through?

A release that renames a metric, moves an endpoint or rewords a log line would make the harness
report nothing, silently, after the GPU time is spent. So before a server starts, every fact of
:data:`harness.contract.facts.FACTS` is located in the build's installed sglang sources
(:func:`harness.contract.check.check_sources`, as ``sglang-repro contract BUILD`` does), and a
``changed`` or ``gone`` fact the case depends on (:func:`harness.contract.facts.needs`) ends the run
as ``infra`` naming the fact; a ``moved`` one is still read through. Facts of kind "profile" (is
the fix in, which draft path a flag set takes) never gate: they are what the run is meant to find
out (harness.contract.profile). The answer is kept per build (``harness.build.cache``), stamped with
the contract itself and the size and mtime of every cited file, so a compare pays for it once and
a reinstalled or edited sglang is checked again. The reference server has no sglang sources and
is never checked here.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

from harness.build import Build
from harness.build.cache import cached_answer, file_stamps
from harness.contract.check import check_sources, drifts_of, reference_sources, sglang_package_of
from harness.contract.facts import FACTS, cited_files, needs
from harness.contract.locate import Located
from harness.contract.sources import DirSources
from harness.scenario import Case
from harness.util.errors import InfraError

__all__ = ["contract_drifts", "contract_gap", "needed_by"]

_SECTION = "contract-located"
# What the answer depends on besides the sources: the facts themselves and how they are checked.
_CONTRACT_DIGEST = hashlib.sha256(repr(FACTS).encode()).hexdigest()[:16]


def needed_by(case: Case) -> frozenset[str]:
    """The kinds of fact (:data:`harness.contract.facts.NEEDS`) a run of ``case`` depends on."""
    sc = case.scenario
    args = sc.server.args
    kinds = {"every run"}
    algo = args.get("speculative-algorithm")
    if algo and str(algo).upper() != "NONE":
        kinds.add("speculative")
    bound = sc.checks.accept_length
    if args.get("enable-metrics") or (bound is not None and bound.source == "gauge"):
        kinds.add("metrics")
    if args.get("api-key"):
        kinds.add("auth")
    return frozenset(kinds)


def contract_drifts(build: Build) -> list[Located]:
    """Every drifted (changed or gone) citation of the contract in ``build``'s sglang sources (kept per build)."""
    package = Path(build.location) if build.location else sglang_package_of(build.python)
    version = build.version or "unknown"
    # every release's wording counts: a file a later (or earlier) wording is read in is stamped too
    files = [package / name for name in cited_files()] + sorted(package.parent.glob("sglang-*.dist-info/RECORD"))
    identity = {"contract": _CONTRACT_DIGEST, "python": build.python, "env": dict(sorted(build.env.items())),
                "version": version, "commit": build.commit, "package": str(package), "files": file_stamps(files)}

    def check() -> list[dict[str, object]]:
        located = check_sources(DirSources(package), version, reference_sources(version))
        return [dataclasses.asdict(d) for d in drifts_of(located)]

    answer = cached_answer(build, _SECTION, identity, check)
    return [Located(**{**d, "found": tuple(d["found"])}) for d in answer]


def contract_gap(build: Build, case: Case) -> str | None:
    """None when every fact ``case`` reads through holds (or moved) in ``build``'s sglang; else one line naming
    the first drifted one (and how many more), for an ``infra`` verdict before anything starts."""
    if build.is_reference:
        return None
    try:
        drifts = contract_drifts(build)
    except (InfraError, OSError) as exc:
        return f"the harness's contract cannot be checked against {build.spec}: {exc}"
    kinds = needed_by(case)
    by_name = {f.name: f for f in FACTS}
    relevant = [d for d in drifts if needs(by_name[d.fact]) in kinds]
    if not relevant:
        return None
    names = list(dict.fromkeys(d.fact for d in relevant))
    more = f"; {len(names) - 1} more fact(s) drifted too: {', '.join(names[1:])}" if len(names) > 1 else ""
    return (f"sglang {build.version or '?'} ({build.spec}) no longer holds the contract fact {names[0]} this "
            f"scenario depends on: {relevant[0].describe()}{more} (sglang-repro contract {build.spec} lists them)")
