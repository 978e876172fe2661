"""A role's trials in a comparison against its recorded baseline: the verdicts, or why none was judged.

``pytest -m gpu`` judges an item's trials against ``fixtures/baselines/<scenario>.yaml``
(:mod:`harness.pytest_plugin.baselines`); a pull request's CI run is a comparison too, and its report must
say the same: which baseline (hardware key, build line, file), each figure's baseline, measured value and
band, or why nothing was judged (no baseline for this hardware, a role expected to crash, no measured trial).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from harness.baselines.check import DEFAULT_FALSE_FAILURE_RATE
from harness.baselines.judge import BaselineVerdict, judge_entry, measured_trials, missing_figures
from harness.records.metric_definitions import ACCEPT_LENGTH
from harness.records.run_record import RunRecord
from harness.scenario import Case

__all__ = ["RoleBaselines", "judge_role_baselines"]


@dataclass(frozen=True)
class RoleBaselines:
    """One role's baseline checks: the key it was judged by, each verdict's one line, or ``skipped`` (why not)."""

    role: str
    hardware: str
    line: str
    path: str
    verdicts: tuple[str, ...] = ()  # BaselineVerdict.message(), in the file's order
    held: tuple[bool, ...] = ()
    skipped: str = ""

    @property
    def failed(self) -> int:
        return sum(1 for h in self.held if not h)

    @property
    def state(self) -> str:
        if self.skipped:
            return "not judged"
        return f"{self.failed} of {len(self.held)} failed" if self.failed else f"{len(self.held)} held"

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "hardware": self.hardware, "line": self.line, "path": self.path,
                "verdicts": [{"message": m, "held": h} for m, h in zip(self.verdicts, self.held)],
                "skipped": self.skipped, "state": self.state}

    @classmethod
    def from_dict(cls, data: Any) -> RoleBaselines:
        verdicts = list(data.get("verdicts") or ())
        return cls(role=str(data.get("role", "")), hardware=str(data.get("hardware", "")),
                   line=str(data.get("line", "")), path=str(data.get("path", "")),
                   verdicts=tuple(str(v.get("message", "")) for v in verdicts),
                   held=tuple(bool(v.get("held")) for v in verdicts), skipped=str(data.get("skipped", "")))


def _of(role: str, hardware: str, line: str, path: str, verdicts: Sequence[BaselineVerdict]) -> RoleBaselines:
    return RoleBaselines(role, hardware, line, path, tuple(v.message() for v in verdicts),
                          tuple(v.held for v in verdicts))


def judge_role_baselines(case: Case, role: str, runs: Sequence[RunRecord],
                          rate: float = DEFAULT_FALSE_FAILURE_RATE) -> RoleBaselines | None:
    """``role``'s trials of ``case`` against the baseline for their hardware and the role's build line; None when
    the scenario has no baseline check. A baselines file that does not validate raises its BaselineFileError
    (bad input, as a scenario's)."""
    from harness.baselines.files import baselines_path, load
    from harness.baselines.keys import build_line, hardware_key

    sc = case.scenario
    checks = sc.checks.baseline_checks()
    if not checks or not runs or role not in sc.builds:
        return None
    reference_server = runs[-1].build.reference_server
    hardware = hardware_key(runs[-1].host, reference_server=reference_server, gpus=sc.hardware.gpus)
    line = build_line(case, role, reference_server=reference_server)
    path = baselines_path(sc.name)
    where = RoleBaselines(role, hardware, line, str(path))
    expected = sc.expect.get(role)
    if expected is not None and "pass" not in expected.outcomes and "fail" not in expected.outcomes:
        return replace(where, skipped=f"expected to {'|'.join(expected.outcomes)}: no figures to judge")
    if not measured_trials(runs):
        return replace(where, skipped="no trial measured its workload")
    refs = load(path)
    entry = refs.find(case.name, hardware, line) if refs is not None else None
    if entry is None:
        return replace(where, skipped=f"no baseline for {hardware} in {path}")
    accept = sc.checks.accept_length
    metric = accept.metric if accept is not None else ACCEPT_LENGTH.name
    missing = missing_figures(checks, entry, accept_metric=metric)
    if missing:
        return replace(where, skipped=f"the baseline holds no {', '.join(missing)}")
    return _of(role, hardware, line, str(path), judge_entry(checks, entry, runs, accept_metric=metric,
                                                             default_rate=rate))
