"""A bisection's folder (``reports/bisect/<id>/``, its ``report.json``) as a finding: the culprit and its proof.

Only a regression that was found is reported: a search for a fix, or one that found nothing, is refused. The
representative run is the culprit's confirming trial that showed the failure (else any of its trials that did);
for a metric, the chart is the culprit's and its parent's confirming trials side by side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.bisect.oracle import Find, Trial, Verdict
from harness.bisect.probe import StepRecord
from harness.records.outcome import Outcome
from harness.upstream.finding import Chart, ChartGroup, Culprit, Finding
from harness.upstream.from_run import kind_of, read_run, scenario_path
from harness.upstream.levels import metric_change
from harness.util.bounded_read import ReadRefused, read_json
from harness.util.errors import UserError

__all__ = ["finding_from_bisect"]


def _load(path: Path) -> tuple[dict[str, Any], Path]:
    file = path / "report.json" if path.is_dir() else path
    try:
        data = read_json(file, "record")
    except (ReadRefused, OSError, ValueError) as exc:
        raise UserError(f"{file}: cannot read the bisection's report: {exc}") from None
    if not isinstance(data, dict) or "find" not in data or "status" not in data or "target" not in data:
        raise UserError(f"{file}: not a bisection's report.json (no find, status and target)")
    return data, file.parent


def _steps(data: Mapping[str, Any]) -> list[StepRecord]:
    raw = list(data.get("release_steps") or []) + list((data.get("commits") or {}).get("steps") or [])
    try:
        return [StepRecord.from_dict(s) for s in raw]
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"bisection report: a step is malformed ({exc})") from None


def _culprit(data: Mapping[str, Any], steps: Sequence[StepRecord]) -> Culprit:
    commits = data.get("commits") or {}
    found = commits.get("culprit")
    confirm = [s for s in steps if s.kind == "confirm"]
    lines = tuple(f"{s.label}: {s.verdict.value} ({s.reason}; {len(s.trials)} fresh trial(s): "
                  f"{', '.join(t.outcome.value + (' ' + t.signature if t.signature else '') for t in s.trials)})"
                  for s in confirm)
    launches = f"{data.get('server_launches', '?')} server launches"
    if found:
        searched = (f"{commits.get('commits_in_range', '?')} commits {str(commits.get('good', ''))[:12]} (good) .. "
                    f"{str(commits.get('bad', ''))[:12]} (bad) of a {commits.get('layout', '?')} checkout, {launches}")
        return Culprit(revision=str(found["commit"]), subject=str(found.get("subject", "")),
                       author=str(found.get("author", "")), date=str(found.get("author_date", "")),
                       parent=str(found.get("parent", "")), files=tuple(found.get("files") or ()),
                       searched=searched, confirmation=lines, confirmed=bool(commits.get("confirmed")))
    pair = data.get("release_pair")
    if not pair:
        raise UserError("bisection report: status found but neither a culprit commit nor a release pair")
    releases = data.get("releases") or []
    return Culprit(revision=str(pair[1]), subject=f"release {pair[1]} (the release before it, {pair[0]}, is good)",
                   author="", date="", parent=str(pair[0]), files=(),
                   searched=f"{len(releases)} releases {releases[0] if releases else '?'}..{releases[-1] if releases else '?'}"
                            f", {launches}", confirmation=lines, confirmed=True)


def _representative(steps: Sequence[StepRecord], culprit: Culprit) -> Trial:
    """The culprit's trial that showed the failure: a confirming one first."""
    mine = [s for s in steps if s.revision == culprit.revision and s.verdict is Verdict.BAD]
    mine.sort(key=lambda s: s.kind != "confirm")
    for step in mine:
        for trial in step.trials:
            if trial.outcome != Outcome.INFRA and trial.artifacts:
                return trial
    raise UserError(f"bisection report: no trial of the culprit {culprit.revision[:12]} with an artifact folder")


def _run_dir(named: str, folder: Path) -> Path:
    for candidate in (Path(named), folder / "runs" / Path(named).name):
        if (candidate / "result.json").is_file():
            return candidate
    raise UserError(f"{folder}: the culprit's run folder {named} is gone")


def finding_from_bisect(path: Path) -> Finding:
    data, folder = _load(path)
    if data["find"] != Find.REGRESSION.value:
        raise UserError(f"{path}: this bisection searched for the fix: nothing to report upstream (the issue is fixed)")
    if data["status"] != "found":
        raise UserError(f"{path}: the bisection did not find a culprit (status {data['status']}: {data.get('summary')})")
    steps = _steps(data)
    culprit = _culprit(data, steps)
    trial = _representative(steps, culprit)
    run_dir = _run_dir(trial.artifacts, folder)
    record = read_run(run_dir)
    target = data["target"]
    metric = target.get("metric")
    shown = [t for s in steps if s.revision == culprit.revision for t in s.trials if t.outcome != Outcome.INFRA]
    bad = sum(1 for t in shown if t.signature == target.get("signature"))
    base = Finding(source="bisect", source_ref=str(path), kind="crash", record=record, run_dir=run_dir,
                   scenario_file=scenario_path(record, folder), how_often=f"{bad} of {len(shown)} trials of the culprit",
                   since=f"{culprit.revision[:12]} {culprit.subject}".strip(), last_good=culprit.parent[:12],
                   culprit=culprit, context=(str(data.get("summary", "")),))
    if not metric:
        return replace(base, kind=kind_of(record, str(run_dir)))
    return _metric(steps, culprit, str(metric), base)


def _metric(steps: Sequence[StepRecord], culprit: Culprit, metric: str, base: Finding) -> Finding:
    def values(revision: str) -> tuple[float, ...]:
        picked = [s for s in steps if s.revision == revision and s.kind == "confirm"] or \
                 [s for s in steps if s.revision == revision]
        return tuple(v for s in picked for t in s.trials if (v := t.value(metric)) is not None)

    good, bad = values(culprit.parent), values(culprit.revision)
    if not good or not bad:
        raise UserError(f"bisection report: no {metric} values for the culprit and its parent")
    groups = (ChartGroup(f"parent {culprit.parent[:12]}", good, False), ChartGroup(f"culprit {culprit.revision[:12]}", bad, True))
    change = metric_change(metric, groups[:1], groups[1:], f"{len(good)} trials of the parent, {len(bad)} of the culprit")
    chart = Chart(f"{change.label}: the culprit against its parent", change.unit or change.label, groups)
    return replace(base, kind="regression", how_often=f"{len(bad)} trials of the culprit", metric=change, chart=chart)
