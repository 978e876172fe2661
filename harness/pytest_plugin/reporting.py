"""What a scenario item tells people: its failure text, JUnit properties, the CI step summary.

- Failure: the expectation that did not hold, then outcome, signature, reason, key metrics, the
  artifact folder and the relevant server-log lines (the traceback its signature matched, else the last
  traceback, else the log's tail).
- JUnit XML (``--junitxml``): each trial appends ``trial``, ``outcome``, ``signature``, ``reason``,
  ``artifacts`` and ``metric.<name>`` properties to its test case (names repeat per trial, in order).
- ``$GITHUB_STEP_SUMMARY``: when set, a Markdown table of the scenario items is appended at the end
  of the session (by the xdist controller only).
"""

from __future__ import annotations

import contextlib
import html
import os
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harness.records.metric_definitions import COMPARED, KEY

if TYPE_CHECKING:
    from harness.records.run_record import RunRecord

__all__ = ["StepSummary", "failure_text", "log_excerpt", "record"]

_KEY_METRICS = tuple(m.name for m in KEY)
_TAIL_LINES = 20
_MAX_LINES = 40
_STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


def record(item: pytest.Item, result: RunRecord) -> None:
    """Attach one trial's result to the item (JUnit properties, step summary)."""
    props: list[tuple[str, object]] = [
        ("trial", result.trial),
        ("outcome", result.outcome.value),
        ("phase", result.phase.value if result.phase else ""),
        ("signature", result.signature or ""),
        ("reason", result.reason),
        ("artifacts", result.artifacts),
    ]
    for name, value in result.metrics.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            props.append((f"metric.{name}", value))
    item.user_properties.extend(props)


def log_excerpt(path: str | os.PathLike[str] | None, signature: str | None = None) -> tuple[str, list[str]]:
    """(what the lines are, the lines) from a server log, read once and bounded: the traceback ``signature``
    matched when there is one (a server that crashed may log more tracebacks after it, as its other
    processes meet the dead one), else its last traceback, else its tail."""
    if not path or not Path(path).is_file():
        return "no server log", []
    from harness.signatures.catalogue import Catalogue, StreamMatcher
    from harness.util.bounded_read import iter_lines
    from harness.util.errors import UserError

    matcher = StreamMatcher(())  # no signature: it still keeps the last traceback block
    if signature:
        with contextlib.suppress(KeyError, ValueError, OSError, UserError):  # another catalogue's signature
            matcher = Catalogue.load().stream([signature])
    tail: deque[str] = deque(maxlen=_TAIL_LINES)
    try:
        for raw in iter_lines(Path(path), "log"):
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            found = matcher.feed(line)
            if found is not None and "\n" in found.excerpt:
                return f"the traceback {signature} matched", found.excerpt.strip("\n").splitlines()[-_MAX_LINES:]
            tail.append(line)
    except UserError as exc:  # not a regular file, or past the cap for a log
        return f"not read: {exc}", []
    tb = matcher.last_traceback()
    if tb:
        return "last traceback", tb.strip("\n").splitlines()[-_MAX_LINES:]
    while tail and not tail[-1]:
        tail.pop()
    return f"last {len(tail)} lines", list(tail)


def _metric(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def failure_text(problem: str, result: RunRecord, trial: int, trials: int) -> str:
    metrics = " ".join(f"{k}={_metric(result.metrics[k])}" for k in _KEY_METRICS
                       if result.metrics.get(k) is not None) or "-"
    log_path = result.server.log
    what, lines = log_excerpt(log_path, result.signature)
    out = [
        f"{problem} (trial {trial + 1} of {trials})",
        f"  outcome:    {result.outcome.value}" + (f" at {result.phase.value}" if result.phase else ""),
        f"  signature:  {result.signature or '-'}",
        f"  reason:     {result.reason}",
        f"  metrics:    {metrics}",
        f"  artifacts:  {result.artifacts}",
        f"  server log: {log_path or '-'} ({what})",
    ]
    out.extend(f"    | {line}" for line in lines)
    return "\n".join(out)


def _cell(text: object, limit: int = 160) -> str:
    flat = " ".join(str(text).split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return html.escape(flat).replace("|", "\\|")


class StepSummary:
    """Collects scenario items' reports and appends a Markdown table to ``path`` at the end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: dict[str, tuple[str, dict[str, Any], str]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)  # a later trial's value replaces an earlier one
        if "scenario" not in props:
            return
        if report.when != "call" and report.passed:
            return
        if report.skipped and isinstance(report.longrepr, tuple):
            detail = str(report.longrepr[2]).removeprefix("Skipped: ")
        elif report.failed:
            detail = report.longreprtext.strip().splitlines()[0] if report.longreprtext.strip() else "failed"
        else:  # a baseline check's verdict, where the item had one, says more than the last trial's reason
            detail = str(props.get("baselines") or props.get("reason", ""))
        self.rows[report.nodeid] = (report.outcome, props, detail)

    def markdown(self) -> str:
        # One column per metric compare judges, headed by the registry's short name.
        shown = [m.heading[:1].upper() + m.heading[1:] for m in COMPARED]
        head = ["### sglang-repro scenarios", "",
                "| Item | Result | Outcome | Signature | " + " | ".join(shown) + " | Detail |",
                "|---|---|---|---|" + "---|" * len(shown) + "---|"]
        body = []
        for nodeid, (status, props, detail) in self.rows.items():
            figures = [_metric(props[f"metric.{m.name}"]) if f"metric.{m.name}" in props else "-" for m in COMPARED]
            cells = [f"`{_cell(nodeid, 200)}`", status, props.get("outcome", "-"), props.get("signature") or "-",
                     *figures, detail]
            body.append("| " + " | ".join(_cell(c, 200) if i else c for i, c in enumerate(cells)) + " |")
        return "\n".join(head + body) + "\n"

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.rows:
            return
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(self.markdown() + "\n")


def pytest_configure(config: pytest.Config) -> None:
    target = os.environ.get(_STEP_SUMMARY_ENV)
    # xdist workers report to the controller; only it writes the table.
    if target and not hasattr(config, "workerinput"):
        config.pluginmanager.register(StepSummary(Path(target)), "sglang-repro-step-summary")
