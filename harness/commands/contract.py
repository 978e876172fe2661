"""``sglang-repro contract BUILD``: does every fact the harness relies on still hold in that build's sglang?"""

from __future__ import annotations

import argparse

from harness.util.errors import EXIT_FAIL, EXIT_OK, InfraError, UserError

__all__ = ["DESCRIPTION", "add_arguments", "main"]

DESCRIPTION = (
    "Check every fact of harness.contract.facts (endpoints, response keys, metric names, log lines, flags and "
    "defaults, the crash paths) against the installed sglang sources of BUILD, resolved as any build is "
    "(pip:sglang==X,deps=none is enough), and print each citation that no longer holds with where it was "
    "expected. For a release the contract cites, on its line; for another, anywhere in its file; a "
    "version-specific citation (the fix marker) says which releases it applies to. Exit status: 0 every "
    "fact holds, 1 some fact does not, 2 bad input (a bad build spec, a reference-server build), 3 infra "
    "(the build cannot be created or has no sglang)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("build", metavar="BUILD", help="build spec: pip:sglang==X[,deps=none], python:PATH, src:...")


def main(args: argparse.Namespace) -> int:
    from harness.build import parse_build_spec, resolve_build
    from harness.contract.check import check_package, sglang_package_of

    parsed = parse_build_spec(args.build)
    if parsed.kind in ("sim", "simsrc"):
        raise UserError(f"{args.build}: the reference server is a model of SGLang, with no sglang sources to check")
    build = resolve_build(parsed)
    package = sglang_package_of(build.python)
    if build.version is None:
        raise InfraError(f"{args.build}: the build does not say which sglang version it holds")
    drifts, facts = check_package(package, build.version)
    for drift in drifts:
        print(drift.describe())
    broken = len({d.fact for d in drifts})
    print(f"sglang {build.version} ({package}): {facts - broken} of {facts} facts hold")
    return EXIT_FAIL if drifts else EXIT_OK
