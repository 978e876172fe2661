"""``sglang-repro triage FILE...``: which known crash each server log, issue body or pasted text shows, how sure,
and whether the release it ran has the fix."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.signatures.catalogue import Catalogue
from harness.triage import LEVELS, bless, print_text, rank, to_json, triage
from harness.util.argtypes import release_version
from harness.util.errors import EXIT_FAIL, EXIT_INFRA, EXIT_OK, UserError

__all__ = ["DESCRIPTION", "add_arguments", "main"]

DESCRIPTION = (
    "Judge server logs and pasted texts (issue bodies as markdown, partial tracebacks, ANSI colour, rank "
    "prefixes, several tracebacks) against the crash-signature catalogue. One line per verdict: "
    "'PATH: SIGNATURE-ID (bug|infra) TITLE [LEVEL]' (LEVEL: confirmed, probable, possible), or 'PATH: none', "
    "each followed by indented lines: what was seen and what was missing, the family and its siblings, and what "
    "the release says about the fix. Exit status: 0 nothing at --fail-on's level or above, 1 a bug signature "
    "at that level, 3 only infrastructure signatures there, 2 bad input (nothing is printed then)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("logs", nargs="*", type=Path, metavar="FILE",
                        help="server logs, CI logs, issue bodies or pasted texts (markdown or plain)")
    parser.add_argument(
        "--catalogue", type=Path, default=None, metavar="PATH",
        help="signature catalogue (default: the built-in one merged with the project's signatures files)",
    )
    parser.add_argument("--title", default=None, metavar="TEXT",
                        help="the issue's title: its message counts for a traceback pasted without its exception line")
    parser.add_argument("--version", default=None, metavar="X.Y.Z", dest="sglang_version", type=release_version,
                        help="the sglang release the text ran (default: read from the text, else fitted from its "
                             "frames' file:line to the real releases)")
    parser.add_argument("--no-releases", action="store_true",
                        help="do not fit frames to the real releases (no wheel is fetched)")
    parser.add_argument("--fail-on", choices=LEVELS[1:], default="confirmed",
                        help="the lowest level that makes the exit status 1 or 3 (default: confirmed)")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="json: a list with one object per file and traceback (file, line, level, signature, ...)")
    parser.add_argument(
        "--excerpt", action="store_true", help="also print the deciding traceback (or line), indented"
    )
    parser.add_argument(
        "--explain", action="store_true",
        help="also print which of the signature's frames each traceback evidenced (line, File line or a "
             "caller's code line), and for the entries not taken why not",
    )
    parser.add_argument("--bless", type=Path, default=None, metavar="FILE",
                        help="add FILE (a pasted text) as a triage fixture with --expect and --source")
    parser.add_argument("--expect", default=None, metavar="ID[:LEVEL]",
                        help="with --bless: the verdict the fixture must give (LEVEL default confirmed; or none)")
    parser.add_argument("--source", default=None, metavar="URL", help="with --bless: where the text was copied from")
    parser.add_argument("--fixtures", type=Path, default=None, metavar="DIR",
                        help="with --bless: the fixtures folder (default: triage/ in the project's first fixtures folder)")


def main(args: argparse.Namespace) -> int:
    catalogue = Catalogue.load(args.catalogue)
    if args.bless is not None:
        return bless(args, catalogue)
    if not args.logs:
        raise UserError("triage: give at least one FILE (or --bless FILE --expect ID[:LEVEL] --source URL)")
    if args.expect is not None or args.source is not None:
        raise UserError("triage: --expect and --source go with --bless FILE")
    verdicts = triage(list(args.logs), catalogue, title=args.title, version=args.sglang_version,
                      releases=not args.no_releases)
    if args.format == "json":
        json.dump([obj for v in verdicts for obj in to_json(v)], sys.stdout, indent=2)
        print()
    else:
        for verdict in verdicts:
            print_text(verdict, catalogue, explain=args.explain, excerpt=args.excerpt)
    sys.stdout.flush()
    kinds = {j.finding.signature.kind for v in verdicts for j in v.judged
             if j.finding.signature is not None and rank(j.finding.level) >= rank(args.fail_on)}
    if "bug" in kinds:
        return EXIT_FAIL
    if "infra" in kinds:
        return EXIT_INFRA
    return EXIT_OK
