"""Which reader a ``FROM`` is for: a run folder, a comparison's report, a bisection's folder or a minimization's
output, told apart by what they hold; ``--incident`` reads the store instead."""

from __future__ import annotations

from pathlib import Path

from harness.upstream.finding import Finding
from harness.util.bounded_read import ReadRefused, read_json
from harness.util.errors import UserError

__all__ = ["finding_from_path", "finding_from_store"]

_WHAT = ("a run folder (result.json), a comparison's report (report.json), a bisection's folder (report.json) or a "
         "minimization's output (its folder, or minimal.yaml in it)")


def _report_kind(file: Path) -> str:
    try:
        data = read_json(file, "record")
    except (ReadRefused, OSError, ValueError) as exc:
        raise UserError(f"{file}: cannot read: {exc}") from None
    if isinstance(data, dict) and "cases" in data and "scenario" in data:
        return "compare"
    if isinstance(data, dict) and "find" in data and "target" in data:
        return "bisect"
    raise UserError(f"{file}: neither a comparison's nor a bisection's report.json")


def finding_from_path(path: Path, *, case: str | None = None, role: str | None = None) -> Finding:
    from harness.upstream.from_minimize import finding_from_minimize, is_minimize_output

    if not path.exists():
        raise UserError(f"{path}: no such file or folder; give {_WHAT}")
    if (case is not None or role is not None) and not ((path / "report.json").is_file() or path.name == "report.json"):
        raise UserError("--case and --role pick from a comparison's report; give one")
    if path.is_dir() and (path / "result.json").is_file():
        from harness.upstream.from_run import finding_from_run

        return finding_from_run(path)
    report = path / "report.json" if path.is_dir() else path
    if report.name == "report.json" and report.is_file():
        if _report_kind(report) == "compare":
            from harness.upstream.from_compare import finding_from_compare

            return finding_from_compare(report, case=case, role=role)
        from harness.upstream.from_bisect import finding_from_bisect

        return finding_from_bisect(report.parent)
    if is_minimize_output(path):
        return finding_from_minimize(path)
    raise UserError(f"{path}: not {_WHAT}")


def finding_from_store(where: str, incident: str) -> Finding:
    from harness.store.store import open_store
    from harness.upstream.from_incident import finding_from_incident

    with open_store(where) as store:
        return finding_from_incident(store, incident)
