"""sglang-repro baselines record SCENARIO --build B: measure (or take from the store) and record baselines.

The change is printed as a diff against the file before anything is written; ``--dry-run`` writes nothing.
Exit 0 recorded (or unchanged), 2 bad input, 3 fewer than two trials finished their workload.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from harness.baselines.files import baselines_path, locked
from harness.baselines.keys import build_line, hardware_key
from harness.baselines.model import Entry
from harness.commands._common import selected_cases
from harness.records.metric_definitions import ACCEPT_LENGTH
from harness.records.run_record import RunRecord
from harness.scenario import Case
from harness.util.argtypes import positive_int
from harness.util.errors import EXIT_INFRA, UserError

DESCRIPTION = __doc__
DEFAULT_TRIALS = 10  # a tighter band than a scenario's 3-5 trials: the baseline's spread is half the band


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    rec = sub.add_parser("record", help="record baselines of a scenario's cases (shows the change first)",
                         description=DESCRIPTION)
    rec.add_argument("scenario", type=Path, metavar="SCENARIO", help="a scenario file")
    rec.add_argument("--build", required=True, metavar="ROLE[=SPEC]",
                     help="the role whose build line is recorded (e.g. after), measured on its own build or on SPEC")
    rec.add_argument("--reference", action="store_true",
                     help="measure the role's CPU reference-server revision (a model of SGLang, keyed by this CPU)")
    rec.add_argument("--case", metavar="NAME", help="a case name, or axis=label[,axis=label] to pick cases")
    rec.add_argument("--trials", type=positive_int, metavar="N",
                     help=f"trials to measure (default {DEFAULT_TRIALS}); with --from-store, the newest N runs")
    rec.add_argument("--from-store", action="store_true", help="take runs already in the store instead of measuring")
    rec.add_argument("--since-ack", action="store_true",
                     help="with --from-store: only runs after the case's latest acknowledged incident (store ack)")
    rec.add_argument("--store", metavar="URL", help="the results store (default: $SGLANG_REPRO_STORE, else "
                                                    "reports/results.db)")
    rec.add_argument("--why", metavar="TEXT", help="kept with the replaced entry (e.g. the acknowledged incident)")
    rec.add_argument("--dry-run", action="store_true", help="show the change; write nothing")
    rec.add_argument("--out", type=Path, metavar="DIR", help="output root of measured runs (default: reports/)")
    rec.add_argument("-v", "--verbose", action="store_true", help="log what the harness does")


def _role_and_spec(case: Case, value: str, reference: bool) -> tuple[str, str]:
    role, sep, spec = value.partition("=")
    roles = case.scenario.builds
    if role not in roles:
        raise UserError(f"--build {value!r}: a baseline is recorded for a role's build line; give ROLE or "
                        f"ROLE=SPEC with ROLE one of {', '.join(roles)}")
    if sep:
        return role, spec
    return role, roles[role].sim_spec if reference else roles[role].spec


def _measure(case: Case, role: str, spec: str, trials: int, out: Path | None) -> list[RunRecord]:
    from harness.build import Builds
    from harness.pipeline import RunOptions, execute_run, resolve_for
    from harness.server.pool import ServerPool
    from harness.util.paths import reports_root

    build = resolve_for(case, spec, Builds())
    runs: list[RunRecord] = []
    try:
        with ServerPool(out or reports_root()) as pool:
            for trial in range(trials):
                record = execute_run(case, build, role=role, trial=trial,
                                     options=RunOptions(out_root=out, progress=False), pool=pool)
                runs.append(record)  # kept before it is said: an interrupt right after the line counts it
                figure = record.metric(ACCEPT_LENGTH.name)
                said = f"accept_length={figure}" if figure is not None else (record.reason or "no figure")
                print(f"  trial {trial + 1}/{trials}: {record.outcome.value} {said} -> {record.artifacts}", flush=True)
    except KeyboardInterrupt:
        # the trials already run are kept on disk; say where, and that the baselines file is as it was
        kept = f" ({runs[0].artifacts} ... {runs[-1].artifacts})" if runs else ""
        print(f"sglang-repro: interrupted after {len(runs)} of {trials} trial(s) of case {case.name}{kept}; "
              "the baselines file is unchanged (record kept runs with --from-store)", file=sys.stderr, flush=True)
        raise
    return runs


def _acknowledged_at(alerts: Sequence[dict[str, object]], scenario: str, case: str) -> str | None:
    times = [str(a["updated_at"]) for a in alerts
             if a.get("state") == "acknowledged" and a.get("scenario") == scenario and a.get("case_name") == case]
    return max(times) if times else None


def _after(started_at: str, since: str) -> bool:
    """``started_at`` is later than ``since`` (ISO times; compared as times, not as text: seconds and
    microseconds spell alike instants differently). A run with no readable start time is not taken."""
    try:
        return datetime.fromisoformat(started_at) > datetime.fromisoformat(since)
    except ValueError:
        return False


def _from_store(args: argparse.Namespace, case: Case, role: str, spec: str, reference: bool) -> list[RunRecord]:
    from harness.commands._store_args import check_store_value
    from harness.store.store import open_store
    from harness.store.url import default_store

    value = str(args.store or default_store(args.out))
    check_store_value(value)
    with open_store(value) as store:
        since = _acknowledged_at(store.alert_rows(), case.scenario.name, case.name) if args.since_ack else None
        if args.since_ack and since is None:
            raise UserError(f"--since-ack: no acknowledged incident of {case.scenario.name} / {case.name} in the store "
                            "(`sglang-repro store ack` one first, or drop --since-ack)")
        runs = [r for r in store.records()
                if r.scenario.name == case.scenario.name and r.case.name == case.name
                and (r.build.role == role or r.build.spec == spec) and r.build.reference_server == reference
                and (since is None or _after(r.started_at, since))]
    runs.sort(key=lambda r: r.started_at)
    if args.trials:
        runs = runs[-args.trials:]
    print(f"  {len(runs)} run(s) from the store" + (f" after the acknowledgement of {since}" if since else ""))
    return runs


def main(args: argparse.Namespace) -> int:
    from harness.baselines.record import apply, entry_from_runs, plan

    loaded, cases = selected_cases(args)
    if args.since_ack and not args.from_store:
        raise UserError("--since-ack selects runs from the store: add --from-store")
    entries: list[Entry] = []
    for case in cases:
        role, spec = _role_and_spec(case, args.build, args.reference)
        on_reference_server = spec.startswith(("sim:", "simsrc:"))
        print(f"{case.name}: {'store runs of' if args.from_store else 'measuring'} {role} ({spec})", flush=True)
        runs = (_from_store(args, case, role, spec, on_reference_server) if args.from_store
                else _measure(case, role, spec, args.trials or DEFAULT_TRIALS, args.out))
        hosts = {hardware_key(r.host, reference_server=on_reference_server, gpus=case.scenario.hardware.gpus) for r in runs}
        if len(hosts) > 1:
            raise UserError(f"case {case.name}: the runs stood on different hardware ({', '.join(sorted(hosts))}); "
                            "a baseline is per hardware: record each from its own runs")
        if not hosts:
            print(f"sglang-repro: case {case.name}: no runs to record", file=sys.stderr)
            return EXIT_INFRA
        try:
            entries.append(entry_from_runs(runs, case=case.name, hardware=hosts.pop(),
                                           line=build_line(case, role, reference_server=on_reference_server)))
        except UserError as exc:
            print(f"sglang-repro: {exc}", file=sys.stderr)
            return EXIT_INFRA
    path = baselines_path(loaded.scenario.name)
    if args.dry_run:
        change = plan(path, loaded.scenario.name, entries, why=args.why)
        print(change.diff or f"{path}: unchanged")
        print("dry run: nothing written")
        return 0
    with locked(path):  # read, merge and write as one: a concurrent recorder's entry is kept, not overwritten
        change = plan(path, loaded.scenario.name, entries, why=args.why)
        print(change.diff or f"{path}: unchanged")
        apply(change)
    print(f"wrote {path}")
    return 0
