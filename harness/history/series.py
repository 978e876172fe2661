"""Series: one (scenario, case, metric, hardware) over builds in order, read from the store.

A point is one build in one batch (a night): its trials' raw values and outcomes. Points are
ordered by the batch's start. Only decided runs that completed their checks (pass, fail) give
metric values: infra and timeout runs never enter a metric series, and a crash has no numbers.
``compare`` batches stay out: they are A/B experiments, not history.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.history.steps import Rule
from harness.outcome import Outcome, most_telling

__all__ = ["METRIC_RULES", "SERIES_BATCH_KINDS", "CasePoints", "Point", "case_points", "rule_for"]

SERIES_BATCH_KINDS = ("nightly", "import", "pytest", "run", "bisect")

# The minimum effects: 2% acceptance length, 5% throughput (and latency).
METRIC_RULES: Mapping[str, Rule] = {
    "accept_length": Rule(0.02), "accept_length_server": Rule(0.02),
    "output_throughput_tok_s": Rule(0.05), "request_throughput_rps": Rule(0.05),
    "ttft_ms_p50": Rule(0.05, higher_is_better=False), "itl_ms_p50": Rule(0.05, higher_is_better=False),
    "e2e_ms_p50": Rule(0.05, higher_is_better=False),
}


def rule_for(metric: str, tolerances: Mapping[str, float] | None = None) -> Rule | None:
    base = METRIC_RULES.get(metric)
    if base is None:
        return None
    tol = (tolerances or {}).get(metric)
    return Rule(tol, base.higher_is_better) if tol else base


@dataclass(frozen=True)
class Point:
    batch_id: str
    batch_label: str
    started_at: str
    build_key: str
    build_spec: str
    build_version: str | None
    build_commit: str | None
    outcome: Outcome | None  # the most telling decided outcome of its trials; None: nothing decided
    signatures: tuple[str, ...]
    metrics: Mapping[str, tuple[float, ...]]  # raw per-trial values of pass/fail runs
    artifacts: tuple[str, ...]

    @property
    def build_label(self) -> str:
        return f"{self.build_spec} ({self.batch_label})"

    def value(self, metric: str) -> float | None:
        vals = self.metrics.get(metric)
        return float(np.median(vals)) if vals else None


@dataclass(frozen=True)
class CasePoints:
    scenario: str
    scenario_file: str
    case: str
    hardware: str
    points: tuple[Point, ...]

    def series(self, metric: str) -> tuple[list[int], list[float]]:
        """(point indices, values) of the points that have ``metric``."""
        idx, vals = [], []
        for i, p in enumerate(self.points):
            v = p.value(metric)
            if v is not None:
                idx.append(i)
                vals.append(v)
        return idx, vals

    @property
    def metric_names(self) -> list[str]:
        return sorted({m for p in self.points for m in p.metrics})


def case_points(runs: pd.DataFrame, metrics: pd.DataFrame) -> list[CasePoints]:
    """Every (scenario, case, hardware) with its points in order."""
    if runs.empty:
        return []
    runs = runs[runs["batch_kind"].isin(SERIES_BATCH_KINDS)]
    decided_with_numbers = {Outcome.PASS.value, Outcome.FAIL.value}
    by_run: dict[str, dict[str, float]] = {}
    if not metrics.empty:
        numeric = metrics[metrics["run_id"].isin(runs.loc[runs["outcome"].isin(decided_with_numbers), "run_id"])]
        for run_id, name, value in numeric[["run_id", "name", "value"]].itertuples(index=False):
            by_run.setdefault(run_id, {})[name] = value
    out: list[CasePoints] = []
    for (scenario, case, hw), group in runs.groupby(["scenario", "case_name", "hardware_key"], sort=True):
        parts = {key: rows for key, rows in group.groupby(["batch_id", "build_key"], sort=False)}
        order = sorted(parts, key=lambda k: (parts[k]["batch_started_at"].min(), parts[k]["started_at"].min()))
        points = []
        for batch_id, bkey in order:
            rows = parts[(batch_id, bkey)].sort_values("trial")
            first = rows.iloc[0]
            decided = [Outcome(o) for o in rows["outcome"] if Outcome(o).decided]
            values: dict[str, list[float]] = {}
            for run_id in rows["run_id"]:
                for name, value in by_run.get(run_id, {}).items():
                    values.setdefault(name, []).append(float(value))
            points.append(Point(
                batch_id=str(batch_id), batch_label=str(first["batch_label"]),
                started_at=str(first["batch_started_at"]),
                build_key=str(bkey), build_spec=str(first["build_spec"]),
                build_version=None if pd.isna(first["build_version"]) else str(first["build_version"]),
                build_commit=None if pd.isna(first["build_commit"]) else str(first["build_commit"]),
                outcome=most_telling(decided) if decided else None,
                signatures=tuple(sorted({str(s) for s in rows["signature"] if isinstance(s, str) and s})),
                metrics={k: tuple(v) for k, v in values.items()},
                artifacts=tuple(str(a) for a in rows["artifacts"]),
            ))
        out.append(CasePoints(str(scenario), str(group["scenario_file"].iloc[0]), str(case), str(hw), tuple(points)))
    return out
