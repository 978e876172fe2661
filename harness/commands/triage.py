"""``sglang-repro triage FILE...``: which known crash each server log, issue body or pasted text shows, how sure,
and whether the release it ran has the fix."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from harness.signatures.catalogue import Catalogue
from harness.signatures.frame_evidence import Evidence
from harness.signatures.levels import LEVELS, Candidate, rank
from harness.signatures.verdicts import FileVerdict, Group, Judged, frames_label, triage_text
from harness.util.atomic import write_atomic
from harness.util.bounded_read import read_bytes
from harness.util.errors import EXIT_FAIL, EXIT_INFRA, EXIT_OK, UserError

__all__ = ["DESCRIPTION", "add_arguments", "main", "triage"]

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
        help="signature catalogue (default: fixtures/signatures.yaml of this checkout)",
    )
    parser.add_argument("--title", default=None, metavar="TEXT",
                        help="the issue's title: its message counts for a traceback pasted without its exception line")
    parser.add_argument("--version", default=None, metavar="X.Y.Z", dest="sglang_version",
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
                        help="with --bless: the fixtures folder (default: fixtures/triage of this checkout)")


def triage(paths: list[Path], catalogue: Catalogue, *, title: str | None = None, version: str | None = None,
           releases: bool = True) -> list[FileVerdict]:
    """Each file judged, in the order given. Raises UserError on a missing or unreadable file, before judging any."""
    from harness.util.bounded_read import ReadRefused, read_bytes

    for path in paths:
        try:
            if not path.exists():
                raise UserError(f"{path}: no such log file")
        except OSError as exc:  # a name too long, a loop of links
            raise UserError(f"{path}: cannot look at it ({exc.strerror or exc})") from None
        if not path.is_file():
            raise UserError(f"{path}: not a regular file")
    texts = []
    for path in paths:
        try:
            texts.append(read_bytes(path, "log").decode("utf-8", errors="replace"))
        except ReadRefused as exc:
            raise UserError(str(exc)) from None
        except OSError as exc:
            raise UserError(f"{path}: cannot read ({exc.strerror or exc.__class__.__name__})") from None
    from harness.signatures.fixture_file import split_header

    out = []
    for path, text in zip(paths, texts, strict=True):
        # a triage fixture is judged as its test judges it: header blanked, its title and version unless given
        header, text = split_header(text)
        out.append(triage_text(path, text, catalogue, title=title or header.get("title"),
                               version=version or header.get("version"), releases=releases))
    return out


def main(args: argparse.Namespace) -> int:
    catalogue = Catalogue.load(args.catalogue)
    if args.bless is not None:
        return _bless(args, catalogue)
    if not args.logs:
        raise UserError("triage: give at least one FILE (or --bless FILE --expect ID[:LEVEL] --source URL)")
    if args.expect is not None or args.source is not None:
        raise UserError("triage: --expect and --source go with --bless FILE")
    verdicts = triage(list(args.logs), catalogue, title=args.title, version=args.sglang_version,
                      releases=not args.no_releases)
    if args.format == "json":
        json.dump([obj for v in verdicts for obj in _json(v, catalogue)], sys.stdout, indent=2)
        print()
    else:
        for verdict in verdicts:
            _print_text(verdict, catalogue, args)
    sys.stdout.flush()
    kinds = {j.finding.signature.kind for v in verdicts for j in v.judged
             if j.finding.signature is not None and rank(j.finding.level) >= rank(args.fail_on)}
    if "bug" in kinds:
        return EXIT_FAIL
    if "infra" in kinds:
        return EXIT_INFRA
    return EXIT_OK


# -- text ------------------------------------------------------------------------------------------


def _print_text(verdict: FileVerdict, catalogue: Catalogue, args: argparse.Namespace) -> None:
    groups = verdict.groups()
    if not groups:
        print(f"{verdict.path}: none")
        if args.explain:
            for j in verdict.judged:
                for cand in _near_misses(j):
                    print(f"  line {j.finding.line_no}: {cand.signature.id} not taken: {'; '.join(cand.missing)}")
                    if cand.evidence is not None:
                        _print_evidence(cand.evidence)
        return
    for group in groups:
        sig = group.signature
        assert sig is not None
        print(f"{verdict.path}: {sig.id} ({sig.kind}) {sig.title} [{group.level}]")
        _print_group(group, catalogue, args)


def _print_group(group: Group, catalogue: Catalogue, args: argparse.Namespace) -> None:
    first = group.members[0]
    best = first.finding.best
    assert best is not None and group.signature is not None
    where = ", ".join(str(m.finding.line_no) if m.finding.line_no else "title" for m in group.members)
    what = {"traceback": "traceback", "cut traceback": "traceback cut before its exception line",
            "line": "line", "title": "title"}[first.finding.source]
    count = f"{len(group.members)} findings, lines" if len(group.members) > 1 else "line"
    print(f"  {count} {where} ({what}): seen {_summary(best, args.explain)}")
    if best.missing:
        shown = best.missing if args.explain else best.missing[:3]
        more = f"; and {len(best.missing) - len(shown)} more" if len(shown) < len(best.missing) else ""
        print(f"  missing: {'; '.join(shown)}{more}")
    family = catalogue.families.get(group.signature.family or "")
    if family is not None:
        print(f"  family {family.id} ({family.title}): this is {group.signature.id}; its siblings:")
        for c in first.finding.siblings:
            print(f"    {c.signature.id}: {c.level}" + (f" ({c.missing[0]})" if c.missing else ""))
    if first.fixed is not None:
        print(f"  fixed: {first.fixed}")
    if first.fit is not None and first.fit.frames and args.explain:
        print(f"  frames fitted to releases: {frames_label(first.fit.frames)}")
    if args.explain and best.evidence is not None:
        print(f"  {best.evidence.reason}")
        _print_evidence(best.evidence)
    if args.excerpt:
        print(f"  line {first.finding.line_no}:")
        for line in (first.finding.block or (first.finding.line,)):
            print(f"    {line}")


def _summary(best: Candidate, full: bool) -> str:
    """What was seen: everything with --explain, else the message and the count of frames evidenced."""
    if full or best.evidence is None:
        return "; ".join(best.seen) or "nothing"
    other = [x for x in best.seen if not x.startswith("frame ")]
    frames = f"{best.evidence.found} of {len(best.evidence.hits)} of its frames"
    return "; ".join([*other, frames])


def _near_misses(judged: Judged) -> list[Candidate]:
    return [c for c in _candidates(judged) if c.level == "none" and c.seen]


def _candidates(judged: Judged) -> list[Candidate]:
    f = judged.finding
    return [c for c in (f.best, *f.siblings, *f.rejected) if c is not None]


def _print_evidence(evidence: Evidence) -> None:
    for hit in evidence.hits:
        if hit.index is None:
            print(f"    - {hit.frame}: not seen")
        else:
            print(f"    + {hit.frame}: block line {hit.index + 1}, {hit.via} line: {hit.text}")


# -- json ------------------------------------------------------------------------------------------


def _json(verdict: FileVerdict, catalogue: Catalogue) -> list[dict[str, Any]]:
    if not verdict.judged:
        return [{"file": str(verdict.path), "line": None, "source": None, "level": "none", "signature": None,
                 "version": verdict.version.version}]
    out = []
    for j in verdict.judged:
        f, best = j.finding, j.finding.best
        sig = f.signature
        out.append({
            "file": str(verdict.path),
            "line": f.line_no,
            "source": f.source,
            "level": f.level,
            "signature": sig.id if sig is not None else None,
            "kind": sig.kind if sig is not None else None,
            "title": sig.title if sig is not None else None,
            "family": sig.family if sig is not None else None,
            "seen": list(best.seen) if best is not None else [],
            "missing": list(best.missing) if best is not None else [],
            "siblings": [{"signature": c.signature.id, "level": c.level, "missing": list(c.missing)}
                         for c in f.siblings],
            "version": verdict.version.version,
            "version_from": verdict.version.where,
            "releases_fitted": list(j.fit.fits) if j.fit is not None else None,
            "fixed": j.fixed,
            "text": f.line,
        })
    return out


# -- bless -----------------------------------------------------------------------------------------


def _bless(args: argparse.Namespace, catalogue: Catalogue) -> int:
    from harness.signatures.fixture_file import parse_expect, read_fixture, render_fixture

    if args.expect is None or args.source is None:
        raise UserError("triage --bless FILE: give --expect ID[:LEVEL] (or none) and --source URL")
    if not str(args.source).startswith("https://"):
        raise UserError(f"triage --bless: --source {args.source!r}: expected the https:// URL the text came from")
    sig_id, level = parse_expect(args.expect, "--expect")
    if sig_id is not None and sig_id not in catalogue:
        raise UserError(f"--expect: unknown signature {sig_id!r}; known: {', '.join(catalogue.ids)}")
    folder = args.fixtures or Path(__file__).resolve().parents[2] / "fixtures" / "triage"
    target = folder / args.bless.name
    if os.path.lexists(target):
        raise UserError(f"{target}: a fixture of that name exists; rename FILE or remove it")
    triage([args.bless], catalogue, releases=False)  # refused as any input is (missing, not a regular file, huge)
    text = read_bytes(args.bless, "log").decode("utf-8", errors="replace")

    def render(line: int | None) -> str:
        return render_fixture(text, source=args.source, expect=args.expect, line=line, title=args.title,
                              version=args.sglang_version)

    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(target, render(0))  # "# line: 0" holds the header's final length
    fixture = read_fixture(target)
    verdict = triage_text(target, fixture.text, catalogue, title=fixture.title, version=fixture.version,
                          releases=not args.no_releases)
    best = verdict.best
    got_id = best.finding.signature.id if best is not None and best.finding.signature is not None else None
    got_level = best.finding.level if best is not None else "none"
    line = best.finding.line_no if best is not None else None
    write_atomic(target, render(line if line is not None else 0))
    said = f"{got_id}:{got_level}" if got_id else "none"
    if (got_id, got_level) != (sig_id, level):
        print(f"{target}: written; triage says {said} now, not {args.expect}: the fixture test fails until it does")
        return EXIT_FAIL
    print(f"{target}: written; triage says {said} (line {line})")
    return EXIT_OK
