"""report.json: the machine-readable comparison (``ComparisonReport.to_dict`` with a schema version)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.compare.verdicts import ComparisonReport
from harness.util.bounded_read import ReadRefused, read_text
from harness.util.errors import UserError

__all__ = ["render_json", "load_report"]


def render_json(report: ComparisonReport) -> str:
    """Strict JSON (no NaN): missing numbers are ``null``."""
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def load_report(path: Path) -> ComparisonReport:
    """Read a report.json back; a file that is not one is a ``UserError`` naming it."""
    try:
        data = json.loads(read_text(Path(path), "record"))
    except ReadRefused as exc:  # absent, a folder, a FIFO, over the cap: the reader says which
        raise UserError(f"{path}: cannot read comparison report: {str(exc).removeprefix(f'{path}: ')}") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read comparison report: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    try:
        return ComparisonReport.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise UserError(f"{path}: not a comparison report: {detail}") from None
