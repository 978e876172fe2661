"""The reports people read about a comparison: report.md, report.html and report.json.

Each renderer is a pure function of a ``harness.compare.verdicts.ComparisonReport``; ``write_reports``
is the only place that touches the disk.
"""

from __future__ import annotations

from pathlib import Path

from harness.compare.verdicts import ComparisonReport
from harness.report._format import PhaseRow, phase_rows_of
from harness.report.html import phase_table, render_html
from harness.report.json import load_report, render_json
from harness.report.markdown import render_markdown
from harness.util.atomic import write_atomic
from harness.util.output_path import make_folder

__all__ = ["write_reports", "render_markdown", "render_html", "render_json", "load_report", "PhaseRow", "phase_rows_of",
           "phase_table"]


def write_reports(report: ComparisonReport, out_dir: Path) -> dict[str, Path]:
    """Write report.md, report.html and report.json into ``out_dir``; returns them by format."""
    out_dir = Path(out_dir)
    make_folder(out_dir, "the report folder")
    rendered = {
        "json": ("report.json", render_json(report)),
        "markdown": ("report.md", render_markdown(report)),
        "html": ("report.html", render_html(report)),
    }
    paths = {}
    for kind, (name, text) in rendered.items():
        path = out_dir / name
        write_atomic(path, text)  # a reader (a CI step, a browser) never sees a half-written report
        paths[kind] = path
    return paths
