"""``sglang-repro issue FROM | --incident ID``: an upstream report (``issue.md`` and its attachments) from a finding."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from harness.util.errors import EXIT_KNOWN_BUG, EXIT_OK, UserError

__all__ = ["DESCRIPTION", "add_arguments", "main"]

DESCRIPTION = (
    "Write the upstream report of a finding: issue.md in the shape of SGLang's bug template (checklist, Describe the "
    "bug, Reproduction, Environment), title.txt and attachments/ (the server log, the traceback, a plain-Python "
    "client script, the scenario, check_env, a chart for a regression). FROM is a run folder, a comparison's "
    "report.json, a bisection's folder or a minimization's output; --incident reads a nightly incident from the "
    "store. It is first checked against the crash catalogue: a known bug on a build without the fix is not written "
    "(exit 4; --force writes it). Exit status: 0 written, 2 bad input (also: a reference-server finding without "
    "--allow-reference-server), 3 infra (the store), 4 a known bug."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", nargs="?", type=Path, metavar="FROM",
                        help="a run folder, a comparison's report.json (or its folder), a bisection's folder, or a "
                             "minimization's folder (or its minimal.yaml)")
    parser.add_argument("--incident", metavar="ID", help="a nightly incident's fingerprint (or one of its alerts')")
    parser.add_argument("--store", metavar="URL", help="with --incident: default $SGLANG_REPRO_STORE or reports/results.db")
    parser.add_argument("--case", metavar="NAME", help="with a comparison: the case to report (default: the first that "
                        "crashed on the later role, else the first metric that got worse)")
    parser.add_argument("--role", metavar="ROLE", help="with a comparison: the role whose runs to report")
    parser.add_argument("-o", "--output", type=Path, metavar="DIR",
                        help="the folder to write (new or empty; default: OUT/issues/<time>-<title>)")
    parser.add_argument("--out", type=Path, metavar="DIR", help="output root (default: reports/)")
    parser.add_argument("--force", action="store_true", help="write the report of a known bug anyway")
    parser.add_argument("--allow-reference-server", action="store_true",
                        help="write a report from a CPU reference-server finding (it says throughout that this is not "
                             "SGLang)")
    parser.add_argument("--keep-paths", action="store_true",
                        help="keep home folders and host names (replaced by ~ and <host> otherwise); secrets are "
                             "redacted either way")


def main(args: argparse.Namespace) -> int:
    from harness.upstream import IssueOptions, finding_from_path, finding_from_store, write_issue
    from harness.util.output_path import check_output_folder

    if (args.source is None) == (args.incident is None):
        raise UserError("issue: give FROM (a run, comparison, bisection or minimization folder) or --incident ID, "
                        "not both")
    if args.store and args.incident is None:
        raise UserError("issue: --store goes with --incident")
    check_output_folder(args.out, "--out")
    if args.output is not None:
        check_output_folder(args.output, "-o")
        if args.output.is_dir() and any(args.output.iterdir()):
            raise UserError(f"-o {args.output}: the folder is not empty; give a new or an empty one")
    if args.incident is not None:
        from harness.store.url import default_store, store_url

        where = str(args.store or default_store(args.out))
        url = store_url(where)
        if url.drivername == "sqlite" and not Path(url.database or "").exists():
            raise UserError(f"--store {url.database}: no such store (an incident is read from the store its nightly "
                            "recorded into)")
        finding = finding_from_store(where, args.incident)
    else:
        finding = finding_from_path(args.source, case=args.case, role=args.role)
    options = IssueOptions(out=args.output, root=args.out, force=args.force,
                           allow_reference_server=args.allow_reference_server, keep_paths=args.keep_paths)
    written = write_issue(finding, options)
    known = written.known
    if known.verdict != "none":
        print(f"known-bug check: {known.message}")
    if written.folder is None:
        print("not written: a known bug (--force writes it anyway)")
        return EXIT_KNOWN_BUG
    issue = written.folder / "issue.md"
    print(f"title: {written.title}")
    print(f"issue: {issue} ({written.body_chars} characters; attachments: {written.folder / 'attachments'})")
    print("file it: " + shlex.join(["gh", "issue", "create", "--repo", "sgl-project/sglang", "--body-file", str(issue),
                                    "--title", written.title]))
    return EXIT_OK
