"""A run folder (``reports/runs/<id>/``) as a finding: the run that crashed, failed or timed out.

The other readers end here too: a comparison, a bisection and a minimization each name the run folders their
verdicts rest on, and the representative one is read as a run is.
"""

from __future__ import annotations

from pathlib import Path

from harness.records.outcome import BROKEN, Outcome
from harness.records.run_record import RunRecord, read_record
from harness.upstream.finding import Finding, FindingKind
from harness.util.errors import UserError

__all__ = ["finding_from_run", "read_run", "scenario_path"]


def read_run(folder: Path) -> RunRecord:
    """The run record of ``folder`` (its ``result.json``); UserError naming the file when there is none."""
    path = folder / "result.json"
    if not path.is_file():
        raise UserError(f"{folder}: not a run folder (no result.json)")
    return read_record(path)


def scenario_path(record: RunRecord, near: Path | None = None) -> Path | None:
    """The scenario file the record names, where it still is: as written (absolute, or relative to the current
    folder), else relative to ``near``; None when it is nowhere."""
    named = Path(record.scenario.file)
    for candidate in (named, *((near / named,) if near is not None and not named.is_absolute() else ())):
        if candidate.is_file():
            return candidate
    return None


def kind_of(record: RunRecord, where: str) -> FindingKind:
    """What the run shows; a pass or a run that could not even try is nothing to report (UserError)."""
    if record.outcome not in BROKEN:
        raise UserError(f"{where}: the run's outcome is {record.outcome.value} ({record.reason}): nothing to report "
                        "upstream; give a run that crashed, failed or timed out")
    return "crash" if record.outcome is Outcome.CRASH else "fail" if record.outcome is Outcome.FAIL else "timeout"


def finding_from_run(folder: Path) -> Finding:
    record = read_run(folder)
    kind = kind_of(record, str(folder))
    return Finding(source="run", source_ref=str(folder), kind=kind, record=record, run_dir=folder,
                   scenario_file=scenario_path(record), how_often=f"1 of 1 runs (trial {record.trial})")
