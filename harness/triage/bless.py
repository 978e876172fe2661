"""``triage --bless``: a pasted text kept as a triage fixture, its expected verdict in its header."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from harness.signatures.catalogue import Catalogue
from harness.triage.fixture_file import parse_expect, read_fixture, render_fixture
from harness.triage.read import read_pasted, triage
from harness.triage.verdicts import triage_text
from harness.util.atomic import write_atomic
from harness.util.errors import EXIT_FAIL, EXIT_OK, UserError
from harness.util.redact import redact_everywhere

__all__ = ["bless"]


def bless(args: argparse.Namespace, catalogue: Catalogue) -> int:
    """``triage --bless FILE``: add a pasted text as a fixture, with the verdict it must give; 1 when it gives another."""
    if args.expect is None or args.source is None:
        raise UserError("triage --bless FILE: give --expect ID[:LEVEL] (or none) and --source URL")
    if not str(args.source).startswith("https://"):
        raise UserError(f"triage --bless: --source {args.source!r}: expected the https:// URL the text came from")
    sig_id, level = parse_expect(args.expect, "--expect")
    if sig_id is not None and sig_id not in catalogue:
        raise UserError(f"--expect: unknown signature {sig_id!r}; known: {', '.join(catalogue.ids)}")
    folder = args.fixtures or _fixtures_folder() / "triage"
    target = folder / args.bless.name
    if os.path.lexists(target):
        raise UserError(f"{target}: a fixture of that name exists; rename FILE or remove it")
    triage([args.bless], catalogue, releases=False)  # refused as any input is (missing, not a regular file, huge)
    text = read_pasted(args.bless)  # redacted: a fixture is meant for the repository
    title = redact_everywhere(args.title) if args.title is not None else None

    def render(line: int | None) -> str:
        return render_fixture(text, source=args.source, expect=args.expect, line=line, title=title,
                              version=args.sglang_version)

    first = render(0)  # "# line: 0" holds the header's final length; a bad header value is refused before any write
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(target, first)
    try:
        fixture = read_fixture(target)
    except BaseException:
        target.unlink(missing_ok=True)  # a fixture its own reader refuses is not left behind
        raise
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


def _fixtures_folder() -> Path:
    """The project's first fixtures folder (``fixtures/`` in this repository), else ``fixtures/`` of the project."""
    from harness.util.project_config import project

    config = project()
    return config.fixtures[0] if config.fixtures else config.root / "fixtures"
