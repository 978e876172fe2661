"""Scenario files as pytest items (pytest's pattern for non-Python tests).

A YAML file below one of the project's ``scenarios`` folders (its configuration, harness.util.project_config) is a
scenario file; where the configuration names none, a YAML file anywhere below a folder named ``scenarios`` is.
It yields one node per case and, under it, two items per build role: ``<role>`` (the real build, marker ``gpu``) and
``<role>[sim]`` (the CPU reference server, marker ``sim``).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.pytest_plugin import markers
from harness.pytest_plugin.items import ScenarioItem
from harness.pytest_plugin.options import settings
from harness.scenario import Case, ScenarioError, load_file
from harness.util.errors import UserError
from harness.util.project_config import project

__all__ = ["CaseNode", "ScenarioFile", "is_scenario_file"]

SCENARIO_DIR = "scenarios"
SUFFIXES = (".yaml", ".yml")


_FOLDERS = pytest.StashKey[tuple[Path, ...]]()


def pytest_configure(config: pytest.Config) -> None:
    try:
        found = project()
    except UserError as exc:  # a bad configuration file: its one line, as pytest's own usage errors are
        raise pytest.UsageError(str(exc)) from None
    config.stash[_FOLDERS] = found.scenarios if found.scenarios_set else ()


def is_scenario_file(path: Path, rootpath: Path, folders: tuple[Path, ...] = ()) -> bool:
    """A YAML file under one of ``folders`` (the configured ones), or, with none, under a folder named scenarios."""
    if path.suffix not in SUFFIXES:
        return False
    if folders:
        return any(folder in path.parents for folder in folders)
    try:
        parts = path.relative_to(rootpath).parts
    except ValueError:
        parts = path.parts
    return SCENARIO_DIR in parts[:-1]


class ScenarioFile(pytest.File):
    def collect(self) -> Iterator[CaseNode]:
        try:
            loaded = load_file(self.path, overrides=settings(self.config).overrides)
        except ScenarioError as exc:
            # CollectError prints just the message: one line per problem, file:line:col first.
            raise self.CollectError("\n".join(exc.lines)) from None
        for case in loaded.cases:
            yield CaseNode.from_parent(self, name=case.name, case=case)


class CaseNode(pytest.Collector):
    def __init__(self, *, case: Case, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case

    def collect(self) -> Iterator[ScenarioItem]:
        sc = self.case.scenario
        config = self.config
        own = {m: "set by a scenario's own markers: list" for m in sc.markers}
        hw = markers.hardware_markers(sc.hardware)
        for name, description in {**own, **hw}.items():
            markers.register(config, name, description)
        for role in sc.builds:
            real = ScenarioItem.from_parent(self, name=role, case=self.case, role=role, reference=False)
            for name in (markers.GPU, markers.SLOW, *hw, *own):
                real.add_marker(name)
            yield real
            if sc.builds[role].sim is None:
                continue  # no reference-server mapping: the role runs only on a real build
            sim = ScenarioItem.from_parent(self, name=f"{role}[{markers.SIM}]", case=self.case, role=role,
                                           reference=True)
            for name in (markers.SIM, markers.SLOW, *own):
                sim.add_marker(name)
            yield sim


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> ScenarioFile | None:
    if is_scenario_file(file_path, parent.config.rootpath, parent.config.stash.get(_FOLDERS, ())):
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


def pytest_collection_finish(session: pytest.Session) -> None:
    roles = {item.role for item in session.items if isinstance(item, ScenarioItem)}
    unused = sorted(set(settings(session.config).builds) - roles)
    if roles and unused:
        # Most likely a typo; the scenarios keep their own specs for the roles they do have.
        known = ", ".join(sorted(roles))
        warnings.warn(pytest.PytestWarning(
            f"--build {', '.join(unused)}: no selected scenario item has that role (roles: {known})"), stacklevel=2)
