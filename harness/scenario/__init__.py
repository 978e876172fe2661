"""Scenario files: the strict format, its loader, matrix expansion and the argv a case stands for."""

from harness.scenario.argv import server_flags, sglang_argv
from harness.scenario.errors import ScenarioError
from harness.scenario.loader import Case, LoadedScenario, find_scenario_files, load_file, load_paths, select_cases
from harness.scenario.model import Expectation, Scenario
from harness.scenario.overrides import SetOverride, parse_set, parse_sets

__all__ = [
    "Case",
    "Expectation",
    "LoadedScenario",
    "Scenario",
    "ScenarioError",
    "SetOverride",
    "find_scenario_files",
    "load_file",
    "load_paths",
    "parse_set",
    "parse_sets",
    "select_cases",
    "server_flags",
    "sglang_argv",
]
