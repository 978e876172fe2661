"""One scenario item: one case x one build role, on the real build or on the reference server.

An item passes when every trial ends as the role's expectation says (``expect.<role>``), or in
``pass`` when the scenario has none for the role (a pass means the scenario's checks held). It is
skipped, never failed nor passed, when the run could not even be tried: hardware missing (checked
before the build is resolved: resolving a ``pip:`` build creates an environment) or an infra outcome
(no sglang in the build, a missing model, GPUs not free in time) that the expectation did not ask for.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import TYPE_CHECKING, Any

import pytest

from harness.build.labels import runs_on_cpu
from harness.expectations.judge import premise_gap, run_holds
from harness.pytest_plugin import baselines, gating, leasing, reporting, runner
from harness.pytest_plugin.options import settings
from harness.records.outcome import NOT_TRIED, Outcome
from harness.scenario import Case
from harness.scenario.model import Expectation
from harness.server import hardware
from harness.util.errors import InfraError, UserError

if TYPE_CHECKING:
    from harness.records.run_record import RunRecord

__all__ = ["HypothesisNotConfirmed", "ScenarioFailure", "ScenarioItem", "judge"]


def judge(result: RunRecord, expectation: Expectation | None) -> str | None:
    """Why ``result`` does not do what the item expects, or None when it does (:mod:`harness.expectations.judge`)."""
    got = result.outcome.value + (f" {result.signature}" if result.signature else "")
    if result.phase and expectation is not None and expectation.phases:
        got += f" at {result.phase.value}"
    if expectation is None:
        return None if result.outcome is Outcome.PASS else f"expected pass (the scenario's checks), got {got}"
    if run_holds(expectation, result.outcome, result.signature, result.phase, result.build.profile):
        return None
    gap = premise_gap(expectation, result.build.profile)
    return f"expected {expectation.describe()}, got {got}" + (f", but {gap}" if gap else "")


class HypothesisNotConfirmed(pytest.PytestWarning):
    """A scenario's hypothesis (``status: hypothesis``) did not hold on this run: an observation."""


class ScenarioFailure(Exception):
    """An item's run did not end as expected; :func:`reporting.failure_text` shows it."""

    def __init__(self, problem: str, result: RunRecord, trial: int, trials: int) -> None:
        super().__init__(problem)
        self.problem = problem
        self.result = result
        self.trial = trial
        self.trials = trials


class ScenarioItem(pytest.Item):
    def __init__(self, *, case: Case, role: str, reference: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.role = role
        self.reference = reference

    @property
    def spec(self) -> str:
        build = self.case.scenario.builds[self.role]
        if self.reference:
            return build.sim_spec
        return settings(self.config).builds.get(self.role, build.spec)

    def runtest(self) -> None:
        sc = self.case.scenario
        opts = settings(self.config)
        spec = self.spec
        self.user_properties.extend([("scenario", sc.name), ("case", self.case.name), ("role", self.role),
                                     ("build", spec), ("server", "reference" if self.reference else "real")])
        needed, pool = 0, []
        if not self.reference and not runs_on_cpu(spec):  # the real-SGLang CPU build leases no GPU
            inventory = hardware.inventory()
            gap = gating.hardware_gap(sc.hardware, inventory)
            if gap:
                pytest.skip(f"hardware: {gap} ({gating.override_hint(sc.hardware, inventory)})")
            needed, pool = sc.hardware.gpus, gating.matching(sc.hardware, inventory)
        trials = opts.trials or sc.workload.trials
        expectation = sc.expect.get(self.role)
        results: list[RunRecord] = []
        try:
            with leasing.item_gpus(needed, pool, timeout_s=opts.gpu_lease_timeout_s) as gpus, \
                    contextlib.ExitStack() as servers:
                servers.callback(runner.close_pool, self)
                for trial in range(trials):
                    result = self.ihook.pytest_sglang_repro_run(item=self, case=self.case, role=self.role,
                                                                spec=spec, trial=trial, gpus=gpus)
                    reporting.record(self, result)
                    results.append(result)
                    problem = judge(result, expectation)
                    if problem is None:
                        continue
                    if result.outcome in NOT_TRIED:
                        pytest.skip(f"{result.outcome.value}: {result.reason} (trial {trial + 1} of {trials})"
                                    f"{gating.model_hint(result.reason or '')}")
                    if expectation is not None and expectation.status == "hypothesis":
                        # A hypothesis that did not hold is an observation: shown, never a failure.
                        self.user_properties.append(("observation", problem))
                        warnings.warn(HypothesisNotConfirmed(f"{self.nodeid}: hypothesis not confirmed: {problem}"),
                                      stacklevel=1)
                        continue
                    raise ScenarioFailure(problem, result, trial, trials)
            if expectation is None or "pass" in expectation.outcomes:
                # Judged on all the trials together, once they ended as expected (harness.baselines).
                baselines.check_item(self, self.case, self.role, self.reference, results)
        except InfraError as exc:
            pytest.skip(f"infra: {exc}{gating.model_hint(str(exc))}")
        except UserError as exc:
            pytest.fail(f"bad input: {exc}", pytrace=False)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, ScenarioFailure):
            failure = excinfo.value
            return reporting.failure_text(failure.problem, failure.result, failure.trial, failure.trials)
        if isinstance(excinfo.value, baselines.BaselineFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        where = "reference server" if self.reference else "real build"
        return self.path, None, f"{self.case.scenario.name} [{self.case.name}] {self.role} on {self.spec} ({where})"
