"""Phases 1 and 2 of a run: resolve the build and its launcher, plan the server, pre-flight it.

A build that cannot be had ends the run as infra (:class:`Unresolved`); pre-flight judges the plan (flags parsed
by the build's own parser, model files, hardware) before anything is started.
"""

from __future__ import annotations

from harness.build import Build, BuildFailure, Builds
from harness.launch.launcher import cheap_gap, launcher_for
from harness.pipeline.stages import Plan, Resolved, Unresolved
from harness.records.outcome import Outcome, Phase
from harness.records.run_record import RunVerdict
from harness.scenario import Case, server_flags
from harness.workload.phases import PhasePlan
from harness.workload.prompts import Prompt

__all__ = ["fresh_plan", "preflight", "resolve", "resolve_for"]


def resolve_for(case: Case, spec: str, builds: Builds) -> Build | BuildFailure:
    """The build of ``spec`` for runs of ``case``, resolved once per ``builds`` (one per command); UserError
    for a bad spec. No ``pip:`` environment is created on a host that cannot run the case."""
    # Creating an environment takes minutes (a full one pulls the GPU stack): not on a host that cannot run the case,
    # which is known in milliseconds (its GPUs, its model files) and is said first.
    return builds.get(spec, install_gap=lambda: cheap_gap(case))


def resolve(case: Case, build: Build | BuildFailure) -> Resolved | Unresolved:
    """The build's launcher and the case as it runs it, or the infra verdict of a build that was not had."""
    if isinstance(build, BuildFailure):
        return Unresolved(build, case, RunVerdict(Outcome.INFRA, f"pre-flight: {build.reason}", Phase.PREFLIGHT))
    launcher = launcher_for(build)
    return Resolved(build, launcher, launcher.case_for(case))


def fresh_plan(resolved: Resolved, prompts: list[Prompt], port: int, env_overlay: dict[str, str],
               phases: tuple[PhasePlan, ...] = ()) -> Plan:
    """What a fresh server is started with on ``port`` and sent."""
    flags = server_flags(resolved.case.scenario, port=port)
    return Plan(prompts, port, flags, [*resolved.build.launcher, *flags], env_overlay, phases)


def preflight(resolved: Resolved, plan: Plan) -> RunVerdict | None:
    """Why this run cannot even be tried, or None. Nothing is launched here."""
    launcher = resolved.launcher
    check = launcher.check_flags([plan.flags])[0]
    if not check.ok:
        return RunVerdict(Outcome.INFRA, f"pre-flight: {launcher.build.spec} rejects the flags: {check.message}",
                          Phase.PREFLIGHT)
    gap = launcher.missing(resolved.case)
    if gap:
        return RunVerdict(Outcome.INFRA, f"pre-flight: {gap}", Phase.PREFLIGHT)
    return None
