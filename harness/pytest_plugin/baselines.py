"""Baseline checks of an item (``checks.accept_length: {baseline: true}`` ...) and ``--update-baselines``.

After an item's trials ended as expected, its baseline checks are judged on all of them together against
``fixtures/baselines/<scenario>.yaml`` (:mod:`harness.baselines`):

- no entry for this case, hardware and build line: the item is skipped with the command that records one,
  never passed (a CI machine whose CPU or GPU has no baseline says so);
- a figure below its band: the item fails naming the metric, the draft position, the baseline, the
  measured value and the band;
- ``--update-baselines``: the trials are recorded instead (the change is shown, then written); a normal
  run never writes.

Every verdict goes to the item's JUnit properties (``baseline.<metric>[.pos<k>].baseline|measured|band_lower``)
and to a report section shown by ``-rA`` (the terminal), and the step summary's detail.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pytest

from harness.baselines.check import DEFAULT_FALSE_FAILURE_RATE
from harness.records.metric_definitions import ACCEPT_LENGTH

if TYPE_CHECKING:
    from harness.records.run_record import RunRecord
    from harness.scenario import Case

__all__ = ["BaselineFailure", "check_item", "record_command"]


class BaselineFailure(Exception):
    """An item's trials fell below a recorded baseline's band."""


def record_command(case: Case, role: str, *, reference: bool) -> str:
    return (f"sglang-repro baselines record {case.file} --build {role}{' --reference' if reference else ''} "
            f"--case {case.name}")


def _show(item: pytest.Item, title: str, text: str) -> None:
    item.add_report_section("call", title, text)
    reporter = item.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and not hasattr(item.config, "workerinput"):
        reporter.write_line("")
        for line in text.splitlines():
            reporter.write_line(line)


def _update(item: pytest.Item, case: Case, role: str, results: Sequence[RunRecord], hardware: str,
            line: str) -> None:
    from harness.baselines.files import baselines_path, locked
    from harness.baselines.record import apply, entry_from_runs, plan
    from harness.util.errors import UserError

    path = baselines_path(case.scenario.name)
    try:
        entry = entry_from_runs(results, case=case.name, hardware=hardware, line=line)
        with locked(path):
            change = plan(path, case.scenario.name, [entry], why="pytest --update-baselines")
            _show(item, f"baselines: {path}", change.diff or f"{path}: unchanged")
            apply(change)
    except UserError as exc:
        pytest.fail(f"--update-baselines: {exc}", pytrace=False)
    item.user_properties.append(("baselines", f"recorded {hardware} / {line} in {path}"))


def check_item(item: pytest.Item, case: Case, role: str, reference: bool, results: Sequence[RunRecord]) -> None:
    """Judge (or with ``--update-baselines`` record) the item's baseline checks on its trials."""
    sc = case.scenario
    checks = sc.checks.baseline_checks()
    update = bool(item.config.getoption("update_baselines"))
    if not results or (not checks and not update):
        return
    from harness.baselines.files import BaselineFileError, baselines_path, load
    from harness.baselines.judge import judge_entry, missing_figures
    from harness.baselines.keys import build_line, hardware_key
    from harness.baselines.model import key_text

    hardware = hardware_key(results[-1].host, reference_server=reference, gpus=sc.hardware.gpus)
    line = build_line(case, role, reference_server=reference)
    if update:
        _update(item, case, role, results, hardware, line)
        return
    path = baselines_path(sc.name)
    try:
        refs = load(path)
    except BaselineFileError as exc:
        pytest.fail(f"bad input: {exc}", pytrace=False)
    entry = refs.find(case.name, hardware, line) if refs is not None else None
    if entry is None:
        pytest.skip(f"no baseline for {hardware} ({key_text((case.name, hardware, line))}) in {path}: "
                    f"record one with `{record_command(case, role, reference=reference)}`")
    accept = sc.checks.accept_length
    metric = accept.metric if accept is not None else ACCEPT_LENGTH.name
    missing = missing_figures(checks, entry, accept_metric=metric)
    if missing:
        pytest.skip(f"the baseline for {hardware} in {path} holds no {', '.join(missing)}: re-record it with "
                    f"`{record_command(case, role, reference=reference)}`")
    rate = item.config.getoption("baseline_false_failure_rate") or DEFAULT_FALSE_FAILURE_RATE
    verdicts = judge_entry(checks, entry, results, accept_metric=metric, default_rate=rate)
    for v in verdicts:
        item.user_properties.extend(v.properties())
    lines = [v.message() for v in verdicts]
    _show(item, f"baselines ({hardware}, {line})", "\n".join(lines))
    failed = [v for v in verdicts if not v.held]
    item.user_properties.append(("baselines", "; ".join(v.message() for v in failed) or
                                 f"{len(verdicts)} baseline check(s) held"))
    if failed:
        head = (f"{len(failed)} of {len(verdicts)} baseline check(s) failed against {path} "
                f"({hardware}, build line {line}, recorded {entry.recorded} from {entry.build}):")
        raise BaselineFailure("\n".join([head, *(f"  {v.message()}" for v in failed)]))


def _rate(text: str) -> float:
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 < value < 0.5:
        raise argparse.ArgumentTypeError(f"{text!r}: a false-failure rate is within (0, 0.5), e.g. 0.01")
    return value


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sglang-repro")
    group.addoption("--update-baselines", action="store_true", default=False,
                    help="record each item's trials as its baseline in fixtures/baselines/<scenario>.yaml "
                         "(the change is shown, then written) instead of judging them")
    group.addoption("--baseline-false-failure-rate", type=_rate, default=None, metavar="RATE",
                    help=f"rate at which an unchanged build fails a baseline check, where the scenario states "
                         f"none (default {DEFAULT_FALSE_FAILURE_RATE})")
