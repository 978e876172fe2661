"""``sglang-repro contract BUILD|VERSION...``: where each fact the harness relies on stands in each build."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from harness.util.errors import EXIT_FAIL, EXIT_OK, InfraError, UserError

if TYPE_CHECKING:
    from harness.contract.locate import Located

__all__ = ["DESCRIPTION", "add_arguments", "main"]

DESCRIPTION = (
    "Locate every fact of harness.contract.facts (endpoints, response keys, metric names, log lines, flags and "
    "defaults; and the evidence of the build profile) in each BUILD's installed sglang sources, resolved as any "
    "build is (pip:sglang==X,deps=none is enough), or in a release's wheel when given a bare VERSION (fetched "
    "--no-deps once, cached, never installed). Per fact: holds (at the line of the cited release, 0.5.14 or "
    "0.5.15, or the nearer one for another release), moved (same text, where now), changed (its function is "
    "there but says something else: shown) or gone. Facts of kind 'profile' or 'teardown' never gate a run. "
    "Exit status: 0 every fact the harness reads through holds or moved, 1 one changed or is gone, 2 bad input "
    "(a bad build spec, a reference-server build), 3 infra (the build cannot be created or has no sglang)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("builds", nargs="+", metavar="BUILD",
                        help="build spec (pip:sglang==X[,deps=none], python:PATH, src:...) or a release VERSION")
    parser.add_argument("--markdown", action="store_true", help="print the fact x release table instead")
    parser.add_argument("--all", action="store_true", help="print holding facts too (default: the others)")


def _is_version(text: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        Version(text)
    except InvalidVersion:
        return False
    return ":" not in text


def _locate(spec: str) -> tuple[str, list[Located]]:
    from harness.build import parse_build_spec, resolve_build
    from harness.contract.check import check_sources, reference_sources, sglang_package_of
    from harness.contract.release_line import release_row
    from harness.contract.sources import DirSources

    if _is_version(spec):
        return spec, list(release_row(spec).located)
    parsed = parse_build_spec(spec)
    if parsed.kind in ("sim", "simsrc"):
        raise UserError(f"{spec}: the reference server is a model of SGLang, with no sglang sources to check")
    build = resolve_build(parsed)
    package = sglang_package_of(build.python)
    if build.version is None:
        raise InfraError(f"{spec}: the build does not say which sglang version it holds")
    return build.version, list(check_sources(DirSources(package), build.version, reference_sources(build.version)))


def main(args: argparse.Namespace) -> int:
    from harness.contract.check import DRIFT, contract_table, fact_statuses
    from harness.contract.facts import FACTS, NEVER_GATES, needs
    from harness.contract.locate import STATUSES

    results: dict[str, list[Located]] = {}
    for spec in args.builds:
        version, located = _locate(spec)
        results[version] = located
    if args.markdown:
        print(contract_table(results))
    by_name = {f.name: f for f in FACTS}
    broken = False
    for version, located in results.items():
        statuses = fact_statuses(located)
        if not args.markdown:
            for loc in located:
                if args.all or loc.status != "holds":
                    print(f"{version} {loc.describe()}")
            counts = {s: sum(1 for v in statuses.values() if v == s) for s in STATUSES}
            gating = sum(1 for name, s in statuses.items() if s in DRIFT and needs(by_name[name]) not in NEVER_GATES)
            print(f"sglang {version}: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
                  + f" of {len(statuses)} facts; {gating} read-through fact(s) changed or gone")
        broken |= any(s in DRIFT and needs(by_name[n]) not in NEVER_GATES for n, s in statuses.items())
    return EXIT_FAIL if broken else EXIT_OK
