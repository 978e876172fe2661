"""A minimization's output as a finding: its session folder (``reports/minimize/<id>/``, or its ``minimal.yaml``).

The minimal scenario is what reproduces it, and the representative run is one of the runs that confirmed it
(``minimal.yaml`` run again, 3 of 3 with the same failure); the report's workload is the minimized one.
"""

from __future__ import annotations

from pathlib import Path

from harness.records.run_record import RunRecord
from harness.scenario import ScenarioError, load_file
from harness.upstream.finding import Finding
from harness.upstream.from_run import kind_of, read_run
from harness.util.bounded_read import ReadRefused, walk_files
from harness.util.errors import UserError

__all__ = ["finding_from_minimize", "is_minimize_output"]

MINIMAL = "minimal.yaml"


def is_minimize_output(path: Path) -> bool:
    folder = path if path.is_dir() else path.parent
    return (folder / MINIMAL).is_file() and (folder / "runs").is_dir()


def _confirmations(session: Path) -> list[tuple[RunRecord, Path]]:
    """The runs of ``minimal.yaml`` itself (the confirmation), oldest first."""
    found: list[tuple[RunRecord, Path]] = []
    try:
        for path in walk_files(session / "runs", "result.json", max_depth=2):
            record = read_run(path.parent)
            named = Path(record.scenario.file)
            if named.name == MINIMAL and named.parent.name == session.name:
                found.append((record, path.parent))
    except ReadRefused as exc:
        raise UserError(f"{session}: cannot read its runs: {exc}") from None
    return sorted(found, key=lambda item: item[0].started_at)


def _kept(minimal: Path) -> str:
    try:
        (case,) = load_file(minimal).cases
    except (ScenarioError, ValueError) as exc:
        raise UserError(f"{minimal}: the minimal scenario does not load: {exc}") from None
    sc = case.scenario
    flags = " ".join(f"--{k}" + ("" if v is True else f" {v}") for k, v in sc.server.args.items() if v not in (None, False))
    wl = sc.workload
    tokens = wl.prompt.tokens
    return (f"the smallest case that still fails this way: flags `{flags or '(none)'}`; {wl.requests} request(s) of "
            f"{tokens} prompt tokens, max_new_tokens {wl.max_new_tokens}, concurrency {wl.concurrency}, "
            f"warm-up {wl.warmup} (`sglang-repro minimize`)")


def finding_from_minimize(path: Path) -> Finding:
    session = path if path.is_dir() else path.parent
    minimal = session / MINIMAL
    runs = _confirmations(session)
    if not runs:
        raise UserError(f"{session}: no run of {MINIMAL} (the confirmation) under runs/: was the minimization confirmed?")
    failing = [(r, d) for r, d in runs if r.outcome == runs[-1][0].outcome and r.signature == runs[-1][0].signature]
    record, run_dir = failing[-1]
    return Finding(source="minimize", source_ref=str(path), kind=kind_of(record, str(run_dir)), record=record,
                   run_dir=run_dir, scenario_file=minimal,
                   how_often=f"{len(failing)} of {len(runs)} confirming runs of the minimal case",
                   minimized=_kept(minimal))
