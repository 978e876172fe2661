"""A run folder for the store tests (the record itself: tests.helpers.make_record)."""

from __future__ import annotations

from pathlib import Path

from harness.records.artifacts import write_record
from harness.records.run_record import RunRecord


def write_run_folder(root: Path, record: RunRecord) -> Path:
    folder = root / record.run_id
    folder.mkdir(parents=True)
    write_record(folder, record)
    return folder
