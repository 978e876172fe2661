"""sglang-repro store import|export|alerts|ack|resolve: move results in and out of the store, and handle incidents."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands._store_args import existing_store
from harness.incidents.incident import stored_incidents
from harness.scenario.errors import excerpt
from harness.store.schema import RESOLUTIONS, RUN_KINDS
from harness.store.store import Store, open_store
from harness.store.transfer import EXPORT_FORMATS, export_store, import_folders
from harness.store.url import default_store
from harness.util.clock import now_iso
from harness.util.errors import EXIT_FAIL, InfraError, UserError, disk_full
from harness.util.output_path import check_output_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=type(parser))
    sub.required = True
    imp = sub.add_parser("import", help="ingest existing run folders (every result.json below)")
    imp.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                     help="run folders, or folders above them (reports/); a run already stored is skipped")
    imp.add_argument("--kind", choices=RUN_KINDS, default="nightly",
                     help="what made these runs (default: nightly, which enters the nightly series; any other kind "
                          "is kept apart from them)")
    exp = sub.add_parser("export", help="write the store as parquet, csv or the PyTorch HUD's v3 records")
    exp.add_argument("--format", required=True, choices=EXPORT_FORMATS,
                     help="parquet or csv: one row per run and metric; hud: the PyTorch HUD's v3 records, one a line")
    exp.add_argument("-o", "--output", type=Path, required=True, metavar="FILE", help="the file to write")
    al = sub.add_parser("alerts", help="list incidents, each with its alerts and names (default: the open ones)")
    al.add_argument("--all", action="store_true", help="also resolved and transient ones")
    for name, state in (("ack", "accepted"), ("resolve", "by hand")):
        p = sub.add_parser(name, help=f"resolve open incidents as {state} (every alert of each at once)"
                           + ("; the new level is the baseline" if name == "ack" else ""))
        p.add_argument("fingerprints", nargs="+", metavar="FINGERPRINT",
                       help="an incident's fingerprint (or one of its alerts')")
        p.set_defaults(state=state)
    lk = sub.add_parser("link", help="record the upstream issue filed for an incident (the dashboard and the nightly's "
                        "messages show it)")
    lk.add_argument("incident", metavar="INCIDENT", help="an incident's fingerprint (or one of its alerts')")
    lk.add_argument("url", metavar="URL", help="the upstream issue, e.g. https://github.com/sgl-project/sglang/issues/N")
    for p in (imp, exp, al, lk, *(sub.choices[n] for n in ("ack", "resolve"))):
        p.add_argument("--store", metavar="URL", help="default: $SGLANG_REPRO_STORE or reports/results.db")


# store import: 1 when some file or value was skipped (each is printed with its path and reason).
EXIT_SOME_SKIPPED = EXIT_FAIL


def main(args: argparse.Namespace) -> int:
    if args.action == "export":
        check_output_file(args.output, "-o")  # before the store is opened or anything is exported
    where = args.store or default_store()
    if args.action != "import":
        existing_store(where)  # alerts, ack, resolve and export read a store: a mistyped path creates none
    # alerts and export only read: a store on a read-only mount is read as it is
    with open_store(where, read_only=args.action in ("alerts", "export")) as store:
        if args.action == "import":
            report = import_folders(store, args.paths, kind=args.kind)
            for line in report.skipped:
                print(f"skipped: {line}")
            print(f"imported {report.recorded} new run(s) of {report.found} found into {store.where}"
                  + (f"; {len(report.skipped)} skipped" if report.some_skipped else ""))
            return EXIT_SOME_SKIPPED if report.some_skipped else 0
        if args.action == "export":
            try:
                n = export_store(store, args.format, args.output)
            except OSError as exc:
                if not disk_full(exc):
                    raise
                raise InfraError(f"-o {args.output}: no space left on the device; nothing replaced") from None
            print(f"wrote {n} {'records' if args.format == 'hud' else 'rows'} to {args.output}")
            return 0
        if args.action == "alerts":
            from harness.store.links import links_by_incident

            links = links_by_incident(store)
            for incident in stored_incidents(store.alert_rows()):
                if args.all or incident.state == "open":
                    print(incident.describe())
                    for url in links.get(incident.fingerprint, ()):
                        print(f"    upstream: {url}")
            return 0
        if args.action == "link":
            return _link(store, args.incident, args.url)
        assert args.state in RESOLUTIONS
        incident_of = {str(r["fingerprint"]): str(r["incident"] or r["fingerprint"]) for r in store.alert_rows()}
        incident_of.update({i: i for i in incident_of.values()})
        missing = [f for f in args.fingerprints if f not in incident_of]
        if missing:
            shown = ", ".join(excerpt(m, limit=40) for m in missing[:5]) + (f" and {len(missing) - 5} more"
                                                                      if len(missing) > 5 else "")
            raise UserError(f"store {store.where}: no incident or alert {shown} (see: sglang-repro store alerts)")
        chosen = sorted({incident_of[f] for f in args.fingerprints})
        n = store.resolve_incidents(chosen, args.state, f"{args.action} {now_iso()[:10]}")
        print(f"{len(chosen)} incident(s) resolved: {args.state} ({n} open alert(s))")
        return 0


def _link(store: Store, ident: str, url: str) -> int:
    """``store link``: the upstream issue recorded on the incident ``ident`` names (or its alert's incident)."""
    from harness.store.links import add_link, check_url

    url = check_url(url)
    rows = store.alert_rows()
    incident = next((str(r["incident"] or r["fingerprint"]) for r in rows
                     if ident in (r["fingerprint"], r["incident"])), None)
    if incident is None:
        raise UserError(f"store {store.where}: no incident or alert {excerpt(ident, limit=40)} (see: sglang-repro store "
                        "alerts --all)")
    new = add_link(store, incident, url)
    print(f"incident {incident}: {'linked to' if new else 'already linked to'} {url}")
    return 0
