"""sglang-repro store import|export|alerts|ack|resolve: move results in and out of the store, and handle incidents."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from pathlib import Path

from harness.history.incidents import stored_incidents
from harness.store.schema import RESOLUTIONS
from harness.store.store import open_store
from harness.store.transfer import EXPORT_FORMATS, export_store, import_folders
from harness.store.url import default_store
from harness.util.errors import UserError
from harness.util.output_path import check_output_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=type(parser))
    sub.required = True
    imp = sub.add_parser("import", help="ingest existing run folders (every result.json below)")
    imp.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    exp = sub.add_parser("export", help="write the store as parquet, csv or the PyTorch HUD's v3 records")
    exp.add_argument("--format", required=True, choices=EXPORT_FORMATS)
    exp.add_argument("-o", "--output", type=Path, required=True, metavar="FILE")
    al = sub.add_parser("alerts", help="list incidents, each with its alerts and names (default: the open ones)")
    al.add_argument("--all", action="store_true", help="also resolved and transient ones")
    for name, state in (("ack", "accepted"), ("resolve", "by hand")):
        p = sub.add_parser(name, help=f"resolve open incidents as {state} (every alert of each at once)"
                           + ("; the new level is the baseline" if name == "ack" else ""))
        p.add_argument("fingerprints", nargs="+", metavar="FINGERPRINT",
                       help="an incident's fingerprint (or one of its alerts')")
        p.set_defaults(state=state)
    for p in (imp, exp, al, *(sub.choices[n] for n in ("ack", "resolve"))):
        p.add_argument("--store", metavar="URL", help="default: $SGLANG_REPRO_STORE or reports/results.db")


# store import: 1 when some file or value was skipped (each is printed with its path and reason).
EXIT_SOME_SKIPPED = 1


def main(args: argparse.Namespace) -> int:
    if args.action == "export":
        check_output_file(args.output, "-o")  # before the store is opened or anything is exported
    with open_store(args.store or default_store()) as store:
        if args.action == "import":
            report = import_folders(store, args.paths)
            for line in report.skipped:
                print(f"skipped: {line}")
            print(f"imported {report.recorded} new run(s) of {report.found} found into {store.where}"
                  + (f"; {len(report.skipped)} skipped" if report.some_skipped else ""))
            return EXIT_SOME_SKIPPED if report.some_skipped else 0
        if args.action == "export":
            n = export_store(store, args.format, args.output)
            print(f"wrote {n} {'records' if args.format == 'hud' else 'rows'} to {args.output}")
            return 0
        if args.action == "alerts":
            for incident in stored_incidents(store.alert_rows()):
                if args.all or incident.state == "open":
                    print(incident.describe())
            return 0
        assert args.state in RESOLUTIONS
        incident_of = {str(r["fingerprint"]): str(r["incident"] or r["fingerprint"]) for r in store.alert_rows()}
        incident_of.update({i: i for i in incident_of.values()})
        missing = [f for f in args.fingerprints if f not in incident_of]
        if missing:
            raise UserError(f"store {store.where}: no incident or alert {', '.join(missing)} "
                            "(see: sglang-repro store alerts)")
        chosen = sorted({incident_of[f] for f in args.fingerprints})
        n = store.resolve_incidents(chosen, args.state, f"{args.action} {datetime.now(timezone.utc):%Y-%m-%d}")
        print(f"{len(chosen)} incident(s) resolved: {args.state} ({n} open alert(s))")
        return 0
