"""The bisection report: ``report.json`` (the record) and ``report.md`` (for a person), in ``reports/bisect/<id>/``.

Both say: the culprit (or fix) with subject, author date and files; whether the confirmation held;
every step with its verdict, outcomes, signatures, metric values and artifact folders; the skips and
why; the release steps when releases were searched; and ``git bisect log``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.bisect.oracle import Find, Target, Verdict
from harness.bisect.probe import StepRecord
from harness.bisect.session import CommitResult
from harness.util.atomic import write_atomic
from harness.util.redact import redact_log

__all__ = ["REPORT_SCHEMA_VERSION", "BisectReport", "write_report"]

REPORT_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class BisectReport:
    id: str
    scenario: str
    case: str
    find: Find
    status: str  # found | ambiguous | not-found
    summary: str
    exit_code: int
    duration_s: float
    target: Target
    commits: CommitResult | None
    release_steps: tuple[StepRecord, ...] = ()
    releases: tuple[str, ...] = ()
    release_pair: tuple[str, str] | None = None  # (last old release, first new release)

    @property
    def launches(self) -> int:
        steps = list(self.release_steps) + list(self.commits.steps if self.commits else ())
        return sum(s.launched for s in steps)


def _target(t: Target) -> dict[str, Any]:
    return asdict(t)


def report_dict(r: BisectReport) -> dict[str, Any]:
    c = r.commits
    data: dict[str, Any] = {
        "schema_version": REPORT_SCHEMA_VERSION, "id": r.id, "scenario": r.scenario, "case": r.case,
        "find": r.find.value, "status": r.status, "summary": r.summary, "exit_code": r.exit_code,
        "duration_s": round(r.duration_s, 3), "target": _target(r.target), "server_launches": r.launches,
        "releases": list(r.releases), "release_pair": list(r.release_pair) if r.release_pair else None,
        "release_steps": [s.to_dict() for s in r.release_steps],
    }
    if c is not None:
        data["commits"] = {
            "repo": c.repo, "layout": c.layout, "good": c.good, "bad": c.bad, "terms": list(c.terms),
            "commits_in_range": c.commits_in_range, "expected_steps": c.expected_steps, "jobs": c.jobs,
            "rounds": c.rounds if c.jobs > 1 else sum(1 for s in c.steps if s.kind == "step"),
            "culprit": asdict(c.culprit) if c.culprit else None, "candidates": list(c.candidates),
            "confirmed": c.confirmed, "steps": [s.to_dict() for s in c.steps],
            "skips": [{"revision": s.revision, "reason": s.reason} for s in c.steps if s.verdict is Verdict.SKIP],
            "bisect_log": c.bisect_log,
        }
    return data


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _steps_table(steps: Sequence[StepRecord], metric: str | None) -> list[str]:
    lines = ["| # | kind | revision | verdict | trials (new servers, cached) | outcomes | "
             + (f"{metric} | " if metric else "") + "reason | artifacts |",
             "|---|---|---|---|---|---|" + ("---|" if metric else "") + "---|---|"]
    for i, s in enumerate(steps, 1):
        outcomes = ", ".join(f"{t.outcome.value}{'/' + t.signature if t.signature else ''}" for t in s.trials)
        values = ", ".join(f"{v:.4g}" for t in s.trials for v in [t.value(metric)] if v is not None) if metric else ""
        arts = " ".join(f"`{Path(t.artifacts).name}`" for t in s.trials[-3:] if t.artifacts)
        row = [str(i), s.kind, _md_escape(s.label), f"**{s.term}**", f"{len(s.trials)} ({s.launched}, {s.cached})",
               _md_escape(outcomes)] + ([values] if metric else []) + [_md_escape(s.reason[:240]), arts]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def report_markdown(r: BisectReport) -> str:
    c = r.commits
    out = [f"# Bisection {r.id}", "", f"**{r.summary}**", "",
           f"- scenario: `{r.scenario}`, case `{r.case}`", f"- searched: {r.target.describe()} ({r.find.value})",
           f"- status: {r.status}, exit code {r.exit_code}, {r.launches} server launches, {r.duration_s:.0f} s", ""]
    if r.release_steps:
        out += ["## Releases", "", f"Versions in order: {', '.join(r.releases)}", ""]
        if r.release_pair:
            out += [f"The change is between release `{r.release_pair[0]}` and release `{r.release_pair[1]}`.", ""]
        out += _steps_table(r.release_steps, r.target.metric) + [""]
    if c is not None:
        out += ["## Commits", "", f"`{c.repo}` ({c.layout} checkout), {c.commits_in_range} commits "
                f"`{c.good[:12]}` (good) / `{c.bad[:12]}` (bad), about {c.expected_steps} steps; terms "
                f"{c.terms[0]}/{c.terms[1]}.", ""]
        if c.culprit:
            k = c.culprit
            out += [f"### First {c.terms[1]} commit: `{k.commit}`", "", f"- subject: {_md_escape(k.subject)}",
                    f"- author: {_md_escape(k.author)}, {k.author_date}", f"- parent: `{k.parent}`",
                    f"- confirmed with fresh trials: {'yes' if c.confirmed else 'NO'}",
                    "- files touched:", *[f"  - `{f}`" for f in k.files], ""]
        elif c.candidates:
            out += [f"Only skipped commits were left: the first {c.terms[1]} commit is one of", "",
                    *[f"- `{x}`" for x in c.candidates], ""]
        out += ["### Steps", ""] + _steps_table(c.steps, r.target.metric) + [""]
        skips = [s for s in c.steps if s.verdict is Verdict.SKIP]
        if skips:
            out += ["### Skipped", "", *[f"- `{s.label}`: {_md_escape(s.reason)}" for s in skips], ""]
        log_title = "git bisect log" if c.jobs == 1 else f"rounds ({c.jobs} commits at once)"
        out += [f"### {log_title}", "", "```", redact_log(c.bisect_log), "```", ""]
    return "\n".join(out)


def write_report(report: BisectReport, folder: Path) -> tuple[Path, Path]:
    from harness.util.output_path import make_folder

    make_folder(folder, "the bisect report folder")
    js = folder / "report.json"
    write_atomic(js, redact_log(json.dumps(report_dict(report), indent=2, default=str)) + "\n")
    md = folder / "report.md"
    write_atomic(md, report_markdown(report))
    return md, js
