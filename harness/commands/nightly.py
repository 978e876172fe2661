"""sglang-repro nightly SCENARIOS... --build SPEC: run every case, record it, detect, exit 1 only on something new."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from harness.argtypes import positive_int
from harness.build import Builds
from harness.errors import EXIT_FAIL, EXIT_INFRA, EXIT_OK, UserError
from harness.history.review import review
from harness.metric_registry import relative_tolerances
from harness.outcome import Outcome
from harness.record import RunRecord
from harness.run import RunInterrupted, RunOptions, execute_run, resolve_for
from harness.scenario import Case, load_paths, select_cases
from harness.scenario.roles import resolve_role
from harness.store.store import new_batch
from harness.store.url import default_store
from harness.store.writer import StoreWriter


def _shard(text: str) -> tuple[int, int]:
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not K/N (e.g. 1/4)") from None
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"{text!r}: K must be within 1..N")
    return k, n


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenarios", nargs="+", type=Path, metavar="SCENARIO", help="scenario files or folders")
    parser.add_argument("--build", required=True, metavar="SPEC", help="the build tonight (a spec or a role)")
    parser.add_argument("--reference", action="store_true", help="with a role: its reference-server revision")
    parser.add_argument("--store", metavar="URL", help="results store (default: $SGLANG_REPRO_STORE or OUT/results.db)")
    parser.add_argument("--shard", type=_shard, metavar="K/N", help="only the K-th of N slices of the cases")
    parser.add_argument("--label", metavar="NAME", help="the night's label (default: its start time)")
    parser.add_argument("--case", metavar="NAME", help="only cases matching (axis=label[,...])")
    parser.add_argument("--trials", type=positive_int, metavar="N", help="trials per case (default: the scenario's)")
    parser.add_argument("--out", type=Path, metavar="DIR", help="output root (default: reports/)")
    parser.add_argument("--no-progress", action="store_true", help="plain progress lines even on a terminal")


def _tolerances(case: Case) -> dict[str, float]:
    return relative_tolerances(case.scenario.checks.relative)


class _Progress:
    """Cases done / total, elapsed, current case: one redrawn line on a terminal, plain lines in CI logs."""

    def __init__(self, total: int, plain: bool) -> None:
        self.total, self.done, self.start = total, 0, time.monotonic()
        self.tty = sys.stderr.isatty() and not plain

    def show(self, current: str) -> None:
        line = f"nightly: {self.done}/{self.total} done, {time.monotonic() - self.start:.0f} s, now: {current}"
        if self.tty:
            sys.stderr.write("\r\x1b[2K" + line[:200])
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def finish(self) -> None:
        if self.tty:
            sys.stderr.write("\n")


def main(args: argparse.Namespace) -> int:
    loaded = load_paths(args.scenarios)
    cases = [c for item in loaded for c in select_cases(item, args.case)]
    if args.shard:
        k, n = args.shard
        cases = [c for i, c in enumerate(cases) if i % n == k - 1]
    if not cases:
        raise UserError("nightly: no case selected")
    planned = [(c, *resolve_role(c, args.build, args.reference)) for c in cases]
    url = args.store or default_store(args.out)
    batch = new_batch("nightly", args.label)
    options = RunOptions(out_root=args.out, progress=False)
    progress = _Progress(len(planned), args.no_progress)
    records: list[RunRecord] = []
    builds = Builds()  # each build resolved once for every case and trial
    with StoreWriter(url, batch) as writer:
        for case, spec, role in planned:
            progress.show(f"{case.scenario.name} [{case.name}]")
            build = resolve_for(case, spec, builds)
            for trial in range(args.trials or case.scenario.workload.trials):
                try:
                    record = execute_run(case, build, role=role, trial=trial, options=options)
                except RunInterrupted as exc:  # stopped by a signal: keep what was done, decide nothing
                    writer.record(exc.record)
                    progress.finish()
                    return EXIT_INFRA
                writer.record(record)
                records.append(record)
            progress.done += 1
        progress.show("detecting")
        progress.finish()
        tolerances = {c.scenario.name: _tolerances(c) for c in cases}
        found = review(writer.store, batch.id, tolerances=tolerances, scenarios=set(tolerances))
        where = writer.store.where
    counts = {o: sum(r.outcome == o for r in records) for o in Outcome}
    print(f"nightly {batch.label}: {len(records)} runs of {len(planned)} cases on {args.build}: "
          + ", ".join(f"{n} {o.value}" for o, n in counts.items() if n) + f"; store {where}")
    for incident in found.incidents:  # one per change, however many cases and metrics it moved
        print(incident.describe())
    if found.resolved:
        print(f"resolved: {len(found.resolved)} alert(s)")
    if found.incidents:
        return EXIT_FAIL
    if any(not r.outcome.decided for r in records):
        return EXIT_INFRA
    return EXIT_OK
