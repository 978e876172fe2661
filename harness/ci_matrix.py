"""The CI job matrix of a set of scenarios: cases grouped by the hardware they need, each group split
into shards that fit a time budget, each job's command the ``nightly --shard K/N`` line it runs.

A group is the scenario files whose cases need one kind of machine (``hardware.gpus`` x
``hardware.gpu_name``); its runner label is ``gpu-<name>-x<count>`` (``cpu`` without GPUs). A case's
duration is what the store has seen (the median ``duration_s`` of its runs, times its trials), else
``default_minutes``. ``nightly --shard K/N`` deals the cases of its files round-robin (case i goes to
shard i mod N + 1), so the plan computes each shard's load with that same rule and takes the fewest
shards whose heaviest fits ``max_minutes``: the matrix describes exactly what each job will run.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness.scenario import Case, LoadedScenario, SetOverride
from harness.scenario.model import Hardware
from harness.util.errors import UserError

__all__ = ["FORMATS", "RUNNERS", "CiJob", "check_job_store", "plan_jobs", "render", "runner_label", "scenario_paths",
           "seen_minutes"]

FORMATS = ("github", "buildkite", "gitlab")


@dataclass(frozen=True)
class CiJob:
    runner: str  # the runner label (a GPU kind and count)
    files: tuple[str, ...]
    shard: tuple[int, int]
    cases: int
    minutes: float  # the expected duration of the shard
    command: str


def runner_label(hardware: Hardware) -> str:
    if not hardware.gpus:
        return "cpu"
    name = re.sub(r"[^a-z0-9]+", "-", (hardware.gpu_name or "any").lower()).strip("-") or "any"
    return f"gpu-{name}-x{hardware.gpus}"


def seen_minutes(store_url: str | None) -> dict[tuple[str, str], float]:
    """Median minutes of one run per (scenario name, case name), from the store; {} without one."""
    if store_url is None:
        return {}
    from harness.store.store import open_store

    with open_store(store_url) as store:
        frame = store.runs_frame()
    out: dict[tuple[str, str], float] = {}
    if frame.empty:
        return out
    for (scenario, case), rows in frame.groupby(["scenario", "case_name"]):
        values = [float(v) for v in rows["duration_s"] if v == v and v is not None]
        if values:
            out[(str(scenario), str(case))] = statistics.median(values) / 60.0
    return out


def _group_key(item: LoadedScenario) -> str:
    labels = {runner_label(c.scenario.hardware) for c in item.cases}
    if len(labels) != 1:
        raise UserError(f"{item.file}: its cases need different hardware ({', '.join(sorted(labels))}); "
                        "ci-matrix shards whole files, so split it into one file per kind of machine")
    return labels.pop()


def _case_minutes(case: Case, seen: Mapping[tuple[str, str], float], default_minutes: float) -> float:
    per_run = seen.get((case.scenario.name, case.name), default_minutes)
    return per_run * case.scenario.workload.trials


RUNNERS = ("nightly", "pytest")


def plan_jobs(loaded: Sequence[LoadedScenario], *, max_minutes: float | None, seen: Mapping[tuple[str, str], float],
              default_minutes: float, build: str, store_arg: str, runner: str = "nightly",
              sets: Sequence[str] = ()) -> list[CiJob]:
    """The jobs of the matrix, by runner label then shard.

    ``runner`` is what each job runs: ``nightly --shard K/N`` (cases dealt round-robin), or ``pytest -m gpu
    --shard K/N`` (the plugin deals its items round-robin in collection order: per case, one item per build
    role, files in the order given), so each shard's load is computed over the units that job will run. ``sets``
    (``--set FIELD=VALUE``, already applied to ``loaded``) go into every job's command: the job reads the file again."""
    groups: dict[str, list[LoadedScenario]] = {}
    for item in loaded:
        groups.setdefault(_group_key(item), []).append(item)
    jobs = []
    for label in sorted(groups):
        files = sorted(groups[label], key=lambda it: str(it.file))
        cases = [c for item in files for c in item.cases]  # the order nightly deals them in
        if runner == "pytest":  # the plugin's gpu items: one per case and build role, in collection order
            cases = [c for c in cases for _ in c.scenario.builds]
        minutes = [_case_minutes(c, seen, default_minutes) for c in cases]
        n = 1
        while max_minutes is not None and n < len(cases) and max(_loads(minutes, n)) > max_minutes:
            n += 1
        loads = _loads(minutes, n)
        names = tuple(str(it.file) for it in files)
        for k in range(1, n + 1):
            carried = [w for s in sets for w in ("--set", s)]
            argv = (["pytest", *names, "-m", "gpu", "--shard", f"{k}/{n}", *carried] if runner == "pytest" else
                    ["sglang-repro", "nightly", *names, "--build", build, "--shard", f"{k}/{n}", "--store", store_arg,
                     "--no-progress", *carried])
            command = " ".join(_quote(a) for a in argv)
            jobs.append(CiJob(runner=label, files=names, shard=(k, n), cases=len(cases[k - 1::n]),
                              minutes=round(loads[k - 1], 1), command=command))
    return jobs


# Exactly one CI variable ($BUILD, ${SGLANG_REPRO_STORE}): double-quoted, so the shell expands it and nothing else.
_CI_VARIABLE = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*|\{[A-Za-z_][A-Za-z0-9_]*\})\Z")


def _quote(arg: str) -> str:
    """One word of a job's command: a bare CI variable is left for the shell to expand; anything else
    (``$(touch PWNED)``, a backquote, ``${X:-$(...)}``) is single-quoted, so no value is ever evaluated."""
    return f'"{arg}"' if _CI_VARIABLE.match(arg) else shlex.quote(arg)


def check_job_store(value: str) -> str:
    """``--job-store``: a CI variable or a store URL without a password (each job's command is printed in
    the CI log, and the matrix itself is saved by the CI system); UserError otherwise."""
    from harness.store.url import redact_url

    if _CI_VARIABLE.match(value) or redact_url(value) == value:
        return value
    raise UserError(f"--job-store {redact_url(value)}: carries a password, which every job's command would print "
                    "into the CI log; give the URL without it and set PGPASSWORD (or a passfile) as a CI secret, "
                    "or keep the default $SGLANG_REPRO_STORE")


def _loads(minutes: Sequence[float], n: int) -> list[float]:
    return [sum(minutes[k::n]) for k in range(n)]


def render(jobs: Sequence[CiJob], fmt: str, *, max_minutes: float | None) -> str:
    if fmt == "github":
        # strategy.matrix: {"include": [...]}; the workflow reads matrix.runner and matrix.command.
        include = [{"runner": j.runner, "shard": f"{j.shard[0]}/{j.shard[1]}", "cases": j.cases,
                    "minutes": j.minutes, "command": j.command} for j in jobs]
        return json.dumps({"include": include}, separators=(",", ":"))
    timeout = math.ceil(max_minutes * 1.5) if max_minutes else None
    if fmt == "buildkite":
        steps = []
        for j in jobs:
            step: dict[str, object] = {"label": f"{j.runner} {j.shard[0]}/{j.shard[1]}", "command": j.command,
                                       "agents": {"queue": j.runner}}
            if timeout:
                step["timeout_in_minutes"] = timeout
            steps.append(step)
        return yaml.safe_dump({"steps": steps}, sort_keys=False)
    if fmt == "gitlab":
        job: dict[str, object] = {
            "script": ['eval "$COMMAND"'],  # the variable holds a quoted command line
            "tags": ["$RUNNER"],
            "parallel": {"matrix": [{"RUNNER": j.runner, "SHARD": f"{j.shard[0]}/{j.shard[1]}", "COMMAND": j.command}
                                    for j in jobs]},
        }
        if timeout:
            job["timeout"] = f"{timeout} minutes"
        return yaml.safe_dump({"sglang-repro-nightly": job}, sort_keys=False)
    raise UserError(f"--format {fmt!r}: one of {', '.join(FORMATS)}")


def scenario_paths(paths: Sequence[Path], overrides: Sequence[SetOverride] = ()) -> list[LoadedScenario]:
    from harness.scenario import load_paths

    return list(load_paths(list(paths), overrides=overrides))
