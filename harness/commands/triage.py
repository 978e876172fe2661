"""``sglang-repro triage LOG...``: which known crash signature, if any, each server log shows."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.signatures.catalogue import Catalogue, Match, Rejection
from harness.signatures.frame_evidence import Evidence
from harness.util.errors import EXIT_FAIL, EXIT_INFRA, EXIT_OK, UserError

__all__ = ["DESCRIPTION", "add_arguments", "main", "triage"]

DESCRIPTION = (
    "Match server logs against the crash-signature catalogue and print one line per file: "
    "'PATH: SIGNATURE-ID (bug|infra) TITLE' for the first match in log order, or 'PATH: none'. "
    "Exit status: 0 no file matched a signature, 1 some file matched a bug signature, "
    "3 the only matches were infrastructure signatures, 2 bad input (a missing or unreadable "
    "log, a bad catalogue); nothing is printed for the files when the input is bad."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("logs", nargs="+", type=Path, metavar="LOG", help="server log file(s)")
    parser.add_argument(
        "--catalogue", type=Path, default=None, metavar="PATH",
        help="signature catalogue (default: fixtures/signatures.yaml of this checkout)",
    )
    parser.add_argument(
        "--excerpt", action="store_true", help="also print the matching traceback (or line), indented"
    )
    parser.add_argument(
        "--explain", action="store_true",
        help="also print which of the signature's frames the traceback evidenced (line, File line or a "
             "caller's code line) and the rule's verdict; for a log with no match, why a line with a "
             "known message was not taken for that signature",
    )


def triage(
    paths: list[Path], catalogue: Catalogue
) -> list[tuple[Path, Match | None, tuple[Rejection, ...]]]:
    """The first match of each log, in the order given, with the near misses seen before it.
    Raises UserError on a missing file, before matching any."""
    for path in paths:
        try:
            if not path.exists():
                raise UserError(f"{path}: no such log file")
        except OSError as exc:  # a name too long, a loop of links
            raise UserError(f"{path}: cannot look at it ({exc.strerror or exc})") from None
        if not path.is_file():
            raise UserError(f"{path}: not a regular file")
    results = []
    for path in paths:
        try:
            match, matcher = catalogue.scan_file(path)
            results.append((path, match, tuple(matcher.rejected)))
        except OSError as exc:
            raise UserError(f"{path}: cannot read ({exc.strerror or exc.__class__.__name__})") from None
    return results


def main(args: argparse.Namespace) -> int:
    catalogue = Catalogue.load(args.catalogue)
    results = triage(list(args.logs), catalogue)
    kinds = set()
    for path, match, rejected in results:
        if match is None:
            print(f"{path}: none")
            if args.explain:
                for miss in rejected:
                    print(f"  line {miss.line_no}: message of {miss.signature.id}, not taken: "
                          f"{miss.evidence.reason if miss.evidence else 'no traceback ends at this line'}")
                    if miss.evidence is not None:
                        _print_evidence(miss.evidence)
            continue
        sig = match.signature
        kinds.add(sig.kind)
        print(f"{path}: {sig.id} ({sig.kind}) {sig.title}")
        if args.explain:
            if match.evidence is None:
                print(f"  line {match.line_no}: message only (the signature lists no frames)")
            else:
                print(f"  line {match.line_no}: {match.evidence.reason}")
                _print_evidence(match.evidence)
        if args.excerpt:
            print(f"  line {match.line_no}:")
            for line in match.excerpt.splitlines():
                print(f"    {line}")
    sys.stdout.flush()
    if "bug" in kinds:
        return EXIT_FAIL
    if "infra" in kinds:
        return EXIT_INFRA
    return EXIT_OK


def _print_evidence(evidence: Evidence) -> None:
    for hit in evidence.hits:
        if hit.index is None:
            print(f"    - {hit.frame}: not seen")
        else:
            print(f"    + {hit.frame}: block line {hit.index + 1}, {hit.via} line: {hit.text}")
