"""Arguments several commands share (a scenario, its cases, trials, the output root), and their checks."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from harness.scenario import Case, LoadedScenario, load_file, select_cases
from harness.util.argtypes import positive_int
from harness.util.output_path import check_output_folder

__all__ = ["add_scenario_arguments", "selected_cases"]


def add_scenario_arguments(parser: argparse.ArgumentParser, *, trials_help: str) -> None:
    parser.add_argument("scenario", type=Path, metavar="SCENARIO", help="a scenario file")
    parser.add_argument("--case", metavar="NAME", help="a case name, or axis=label[,axis=label] to pick cases")
    parser.add_argument("--trials", type=positive_int, metavar="N", help=trials_help)
    parser.add_argument("--out", type=Path, metavar="DIR", help="output root (default: reports/)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the harness does")


def selected_cases(args: argparse.Namespace) -> tuple[LoadedScenario, list[Case]]:
    """The loaded scenario and the cases ``--case`` picks (all without it), after checking that the
    output root can be written (``--out``); raises ScenarioError or UserError before anything starts."""
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    loaded = load_file(args.scenario)
    cases = select_cases(loaded, args.case)
    check_output_folder(args.out, "--out")
    return loaded, cases
