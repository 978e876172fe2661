"""The nightly: run a build over scenarios, record every run in the store, detect, and say what is new.

``run_nightly`` is the whole night, callable without argparse (``commands/nightly.py`` parses and
prints): every planned case x trial through ``run.execute_run``, each record written to the store
as it is final, then ``history.review`` over the series of the scenarios run tonight. What it
returns is a record; the exit status follows from it (``NightlyResult.exit_code``): 1 only on a new
incident, 3 when runs could not be decided or the night was interrupted, else 0.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.build import Builds
from harness.executor.job import PlannedCase
from harness.incidents.incident import Incident
from harness.incidents.review import Review, review
from harness.pipeline import RunInterrupted, RunOptions, execute_run, resolve_for
from harness.records.metric_definitions import relative_tolerances
from harness.records.outcome import Outcome
from harness.records.run_record import RunRecord
from harness.scenario import Case
from harness.store.store import new_batch
from harness.store.url import redact_url, store_url
from harness.store.writer import StoreWriter
from harness.util.errors import EXIT_FAIL, EXIT_INFRA, EXIT_OK, HarnessError
from harness.util.interrupts import Shield

__all__ = ["Elsewhere", "NightlyResult", "PlannedCase", "run_nightly", "shard", "tolerances"]


Elsewhere = Callable[[Sequence[PlannedCase], StoreWriter, list[RunRecord]], bool]


@dataclass(frozen=True)
class NightlyResult:
    label: str
    planned: int
    records: tuple[RunRecord, ...]
    where: str  # the store, password redacted
    found: Review | None  # None: interrupted before detection
    interrupted: bool = False

    @property
    def incidents(self) -> tuple[Incident, ...]:
        return self.found.incidents if self.found else ()

    @property
    def counts(self) -> dict[Outcome, int]:
        return {o: n for o in Outcome if (n := sum(r.outcome == o for r in self.records))}

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return EXIT_INFRA
        if self.incidents:
            return EXIT_FAIL
        return EXIT_INFRA if any(not r.outcome.decided for r in self.records) else EXIT_OK


def shard(cases: Sequence[Case], k: int, n: int) -> list[Case]:
    """The K-th of N slices of ``cases`` (every N-th, so each slice gets a share of every scenario)."""
    return [c for i, c in enumerate(cases) if i % n == k - 1]


def tolerances(case: Case) -> dict[str, float]:
    """The scenario's relative tolerances, as the minimum effect of the metrics they name."""
    return relative_tolerances(case.scenario.checks.relative)


def run_nightly(planned: Sequence[PlannedCase], *, store: str, label: str | None = None, trials: int | None = None,
                out_root: Path | None = None,
                progress: Callable[[int, str], None] | None = None,
                elsewhere: Elsewhere | None = None) -> NightlyResult:
    """Run, record and review one night. ``progress(done, current)`` is told before each case and
    before detection; ``trials`` replaces each scenario's own count. ``elsewhere`` runs every case and
    trial somewhere else (``harness.executor``: SLURM jobs), recording each through the writer it is
    given and appending it to the list; it returns True when the submitter was interrupted."""
    batch = new_batch("nightly", label)
    options = RunOptions(out_root=out_root, progress=False)
    records: list[RunRecord] = []
    builds = Builds()  # each build resolved once for every case and trial
    with StoreWriter(store, batch) as writer:
        if elsewhere is not None and elsewhere(planned, writer, records):
            return NightlyResult(batch.label, len(planned), tuple(records), writer.store.where, None, True)
        unstored: RunRecord | None = None  # a finished run's record between its run and its row
        try:
            for done, item in enumerate(planned if elsewhere is None else ()):
                if progress:
                    progress(done, f"{item.case.scenario.name} [{item.case.name}]")
                build = resolve_for(item.case, item.spec, builds)
                for trial in range(trials or item.case.scenario.workload.trials):
                    try:
                        record = execute_run(item.case, build, role=item.role, trial=trial, options=options)
                    except RunInterrupted as exc:  # stopped by a signal: keep what was done, decide nothing
                        unstored = exc.record
                        raise
                    unstored = record
                    writer.record(record)
                    records.append(record)
                    unstored = None
            if progress:
                progress(len(planned), "detecting")
            by_scenario = {p.case.scenario.name: tolerances(p.case) for p in planned}
            found = review(writer.store, batch.id, tolerances=by_scenario, scenarios=set(by_scenario))
        except KeyboardInterrupt:
            # Anywhere: in a run, between two, in a store write, in detection. What finished is kept (its row
            # written now if the signal cut it), nothing is decided, and the command says so (exit 3).
            with Shield(reraise=False):  # a second signal must not cut this write
                if unstored is not None:
                    try:
                        writer.record(unstored)
                        if unstored not in records and unstored.outcome is not Outcome.INTERRUPTED:
                            records.append(unstored)
                    except HarnessError as exc:
                        print(f"sglang-repro: {exc}", file=sys.stderr)
            return NightlyResult(batch.label, len(planned), tuple(records), redact_url(store_url(store)), None, True)
        return NightlyResult(batch.label, len(planned), tuple(records), writer.store.where, found)
