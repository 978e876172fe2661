"""The commands' side of ``--executor slurm``: plan the jobs, check the store, submit, record, report.

Each command keeps its own review and report; this module turns its planned cases (``PlannedCase``)
into jobs, refuses an unsafe store before anything is submitted, and records every record that comes
back (the jobs' own, or the ``infra`` / ``interrupted`` ones made for jobs that handed none back).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from harness.executor.job import PlannedCase, jobs_for
from harness.executor.options import dispatch, slurm_executor, slurm_store
from harness.records.outcome import exit_code_for
from harness.records.run_record import RunRecord
from harness.scenario import Case
from harness.store.store import Batch, new_batch
from harness.store.writer import DeferredWriter, StoreWriter, finish_store
from harness.util.paths import reports_root

__all__ = ["compare_on_slurm", "nightly_on_slurm", "run_on_slurm", "runs_on_slurm"]

Planned = Sequence[PlannedCase]


def runs_on_slurm(args: argparse.Namespace, planned: Planned, *, store: str | None, batch: Batch,
                  out_root: Path | None, on_record: Callable[[RunRecord], None]) -> tuple[list[RunRecord], bool]:
    """Every run of ``planned`` (``args.trials`` or the scenario's trials each) as SLURM jobs; (records,
    interrupted). ``store`` must already be a server URL (:func:`slurm_store`) or None."""
    root = (out_root or reports_root()).resolve()
    executor = slurm_executor(args, root, batch.id)
    jobs = jobs_for(planned, args.trials, root, store=store, batch=batch)
    return dispatch(executor, jobs, on_record)


def run_on_slurm(args: argparse.Namespace, planned: Planned, store: str | None,
                 summary_line: Callable[[RunRecord], str]) -> int:
    """``run --executor slurm``: the runs as jobs, each record printed and recorded as it arrives."""
    server = slurm_store(store, "run")
    writer = DeferredWriter(server, new_batch("run"))

    def arrived(record: RunRecord) -> None:
        print(summary_line(record), flush=True)
        writer.record(record)

    records, _ = runs_on_slurm(args, planned, store=server, batch=writer.batch, out_root=args.out,
                               on_record=arrived)
    return finish_store(writer, exit_code_for([r.outcome for r in records]))


def nightly_on_slurm(args: argparse.Namespace, planned: Planned, writer: StoreWriter,
                     records: list[RunRecord]) -> bool:
    """``nightly --executor slurm``: every run as a job, recorded through ``writer`` and appended to
    ``records``; True when the submitter was interrupted (the night decides nothing then)."""
    server = slurm_store(writer.url, "nightly")

    def arrived(record: RunRecord) -> None:
        writer.record(record)
        records.append(record)

    _, stopped = runs_on_slurm(args, planned, store=server, batch=writer.batch, out_root=args.out,
                               on_record=arrived)
    return stopped


def compare_on_slurm(args: argparse.Namespace, cases: Sequence[Case], specs: Mapping[str, str],
                     writer: DeferredWriter, progress: Callable[[RunRecord], None]
                     ) -> Callable[[Path], dict[tuple[str, str], list[RunRecord]]]:
    """``compare --executor slurm``: what ``compare_cases(elsewhere=...)`` calls with the report folder. The
    store is checked now, before anything is submitted."""
    server = slurm_store(writer.url if writer.enabled else None, "compare")

    def run_all(report_dir: Path) -> dict[tuple[str, str], list[RunRecord]]:
        # Trial-major within a case (trial 0 of every role, then trial 1): the queue starts them in that order.
        planned = [PlannedCase(case, spec, role) for case in cases for role, spec in specs.items()]
        jobs = sorted(jobs_for(planned, args.trials, report_dir, store=server, batch=writer.batch),
                      key=lambda j: (j.case, j.trial))
        root = report_dir.resolve()
        records, _ = dispatch(slurm_executor(args, root, writer.batch.id), jobs, progress)
        out: dict[tuple[str, str], list[RunRecord]] = {}
        for record in sorted(records, key=lambda r: r.trial):
            out.setdefault((record.case.name, record.build.role or ""), []).append(record)
        return out

    return run_all
