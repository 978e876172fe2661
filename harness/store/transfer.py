"""``store import`` (artifact folders into the store) and ``store export`` (parquet, csv, hud).

Exports go through pandas: one row per (run, metric) in long format, with the run's build, host
and batch beside it (pyarrow writes Parquet). ``hud`` writes the PyTorch HUD's
``oss_ci_benchmark_v3`` record shape (pytorch/test-infra, ``clickhouse_db_schema/oss_ci_benchmark_v3/
schema.sql``): one record per (batch, scenario case, build, hardware, metric) whose
``metric.benchmark_values`` holds every trial's raw value.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from harness.errors import UserError
from harness.metric_registry import METRICS
from harness.record import RunRecord, read_record
from harness.store.store import Batch, Store

__all__ = ["EXPORT_FORMATS", "ImportReport", "export_frame", "export_store", "find_records", "hud_records",
           "import_folders"]

log = logging.getLogger(__name__)

EXPORT_FORMATS = ("parquet", "csv", "hud")


@dataclass(frozen=True)
class ImportReport:
    found: int
    recorded: int
    skipped: tuple[str, ...]  # "PATH: why" for each result.json that could not be read


def find_records(paths: list[Path]) -> Iterator[Path]:
    """Every ``result.json`` under the given folders (or the files themselves), sorted."""
    for path in paths:
        if path.is_file():
            yield path
        elif path.is_dir():
            yield from sorted(path.rglob("result.json"))
        else:
            raise UserError(f"{path}: no such file or folder")


def _import_batch(record: RunRecord) -> Batch:
    # Imported runs have no batch: one per build and day stands for a nightly.
    day = record.started_at[:10] or "unknown"
    return Batch(id=f"import-{record.build.spec}-{day}"[:64], kind="import",
                 label=f"{day} {record.build.spec}", started_at=record.started_at or day)


def import_folders(store: Store, paths: list[Path]) -> ImportReport:
    """Ingest the run folders under ``paths``; a file that is not a run record is reported, not fatal."""
    by_batch: dict[Batch, list[RunRecord]] = {}
    skipped: list[str] = []
    found = 0
    for path in find_records(paths):
        found += 1
        try:
            record = read_record(path)
        except UserError as exc:
            skipped.append(str(exc))
            continue
        by_batch.setdefault(_import_batch(record), []).append(record)
    recorded = sum(store.record_many(recs, batch) for batch, recs in by_batch.items())
    return ImportReport(found=found, recorded=recorded, skipped=tuple(skipped))


def export_frame(store: Store) -> pd.DataFrame:
    """Long format: one row per (run, metric); runs without metrics keep one row with an empty metric."""
    runs = store.runs_frame()
    metrics = store.metrics_frame()
    frame = runs.merge(metrics.rename(columns={"name": "metric"}), on="run_id", how="left")
    return frame.sort_values(["batch_started_at", "scenario", "case_name", "trial", "metric"], na_position="last")


def _epoch(text: str) -> int:
    try:
        return int(datetime.fromisoformat(text).timestamp())
    except ValueError:
        return 0


def hud_records(frame: pd.DataFrame, *, repo: str = "sgl-project/sglang") -> list[dict[str, Any]]:
    """The ``oss_ci_benchmark_v3`` shape: a record per (batch, case, build, hardware, metric)."""
    rows = frame.dropna(subset=["metric", "value"])
    out: list[dict[str, Any]] = []
    keys = ["batch_id", "scenario", "case_name", "build_key", "hardware_key", "metric"]
    for _, group in rows.groupby(keys, sort=True):
        first = group.iloc[0]
        out.append({
            "timestamp": _epoch(str(first["batch_started_at"])),
            "schema_version": "v3",
            "name": f"sglang-repro {first['scenario']}",
            "repo": repo,
            "head_branch": "",
            "head_sha": first["build_commit"] or "",
            "workflow_id": 0, "run_attempt": 1, "job_id": 0,
            "runners": [{
                "name": first["hostname"] or "", "type": first["hardware_key"], "cpu_info": first["cpu"] or "",
                "cpu_count": 0, "mem_info": "", "avail_mem_in_gb": 0, "gpu_info": first["gpu_name"] or "",
                "gpu_count": int(first["gpu_count"] or 0), "gpu_mem_info": "", "avail_gpu_mem_in_gb": 0,
                "extra_info": {"driver_version": first["driver_version"] or "",
                               "cuda_version": first["cuda_version"] or ""},
            }],
            "benchmark": {"name": str(first["scenario"]), "mode": "inference", "dtype": "",
                          "extra_info": {"case": str(first["case_name"]), "batch": str(first["batch_label"]),
                                         "role": str(first["role"] or "")}},
            "model": {"name": str(first["case_name"]), "type": "sglang-server", "backend": str(first["build_kind"]),
                      "origins": ["sglang-repro"], "extra_info": {"experiment": str(first["experiment"])}},
            "inputs": {},
            "dependencies": {"sglang": {"repo": repo, "branch": "", "sha": first["build_commit"] or "",
                                        "version": first["build_version"] or "",
                                        "extra_info": {"spec": str(first["build_spec"])}}},
            "metric": {"name": str(first["metric"]),
                       "benchmark_values": [float(v) for v in group.sort_values("trial")["value"]],
                       "target_value": 0.0,
                       "extra_info": {"outcomes": ",".join(group.sort_values("trial")["outcome"]),
                                      **_metric_facts(str(first["metric"]))}},
        })
    return out


def _metric_facts(name: str) -> dict[str, str]:
    """The registry's unit and better direction of a metric, for a reader that does not know the harness."""
    m = METRICS.get(name)
    return {} if m is None else {"unit": m.unit, "better": m.better.value}


def export_store(store: Store, fmt: str, out: Path) -> int:
    """Write the store to ``out`` as ``fmt``; the number of rows (records for hud) written."""
    if fmt not in EXPORT_FORMATS:
        raise UserError(f"--format {fmt}: not one of {', '.join(EXPORT_FORMATS)}")
    frame = export_frame(store)
    out.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "parquet":
        frame.to_parquet(out, index=False, engine="pyarrow")
        return len(frame)
    if fmt == "csv":
        frame.to_csv(out, index=False)
        return len(frame)
    records = hud_records(frame)
    out.write_text(json.dumps(records, indent=1) + "\n")
    return len(records)
