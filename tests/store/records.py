"""Run records for the store tests, built as the harness builds them (typed, then through result.json)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from harness.records.artifacts import write_record
from harness.records.outcome import Outcome, Phase
from harness.records.run_record import BuildRef, CaseRef, HostInfo, RunRecord, ScenarioRef, ServerInfo

SCENARIO = "store-test-scenario"


def make_record(run_id: str, *, case: str = "tokens=276", spec: str = "sim:post-fix", trial: int = 0,
                outcome: Outcome = Outcome.PASS, signature: str | None = None, reason: str = "all checks held",
                metrics: Mapping[str, float | None] | None = None, started_at: str = "2026-11-01T00:00:00+00:00",
                artifacts: str = "", scenario: str = SCENARIO, commit: str | None = None,
                version: str | None = "sim-0.1", profile: Mapping[str, object] | None = None) -> RunRecord:
    return RunRecord(
        run_id=run_id, scenario=ScenarioRef(scenario, f"scenarios/{scenario}.yaml"),
        case=CaseRef(case, {"tokens": 276}),
        build=BuildRef(kind=spec.split(":")[0], spec=spec, version=version, commit=commit, role="after",
                       reference_server=spec.startswith("sim:"), profile=dict(profile) if profile else None),
        trial=trial, outcome=outcome, signature=signature, reason=reason,
        metrics=dict(metrics if metrics is not None else {"accept_length": 1.8, "output_throughput_tok_s": 200.0}),
        server=ServerInfo(argv=("python", "-m", "harness.sim.server", "--port", "30000")),
        host=HostInfo(hostname="ci-1", cpu="test-cpu", platform="linux"),
        started_at=started_at, duration_s=1.5, harness_version="0.1.0", artifacts=artifacts,
        phase=Phase.WORKLOAD if outcome == Outcome.CRASH else None, experiment="abc123",
    )


def write_run_folder(root: Path, record: RunRecord) -> Path:
    folder = root / record.run_id
    folder.mkdir(parents=True)
    write_record(folder, record)
    return folder
