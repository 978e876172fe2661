"""Arguments several commands share (a scenario, its cases, trials, the output root), and their checks."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from harness.scenario import Case, LoadedScenario, SetOverride, load_file, parse_sets, select_cases
from harness.util.argtypes import positive_int
from harness.util.errors import UserError
from harness.util.output_path import check_output_folder

__all__ = ["add_scenario_arguments", "add_set_argument", "scenario_overrides", "selected_cases"]

SET_HELP = ("change a scenario field before validation, e.g. --set server.model=/models/gemma-4-31B-it "
            "--set hardware.gpu_name=H200 --set hardware.gpus=8 (repeatable; VALUE is a YAML scalar, null removes "
            "a server arg)")


def add_set_argument(parser: argparse.ArgumentParser) -> None:
    """``--set FIELD=VALUE`` (repeatable): the scenario pointed at this host's model, hardware and build."""
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", dest="set", help=SET_HELP)


def scenario_overrides(args: argparse.Namespace) -> tuple[SetOverride, ...]:
    """The ``--set`` overrides, parsed (a bad one is a UserError naming it). Runs that execute elsewhere read
    the scenario file again, so with ``--executor slurm`` an override would be lost: refused, not dropped."""
    sets = parse_sets(getattr(args, "set", None))
    if sets and getattr(args, "executor", "local") == "slurm":
        raise UserError("--set: not carried to SLURM jobs (they read the scenario file again); "
                        "write the overrides into a copy of the scenario")
    return sets


def add_scenario_arguments(parser: argparse.ArgumentParser, *, trials_help: str) -> None:
    parser.add_argument("scenario", type=Path, metavar="SCENARIO", help="a scenario file")
    parser.add_argument("--case", metavar="NAME", help="a case name, or axis=label[,axis=label] to pick cases")
    parser.add_argument("--trials", type=positive_int, metavar="N", help=trials_help)
    parser.add_argument("--out", type=Path, metavar="DIR", help="output root (default: reports/)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the harness does")
    add_set_argument(parser)


def selected_cases(args: argparse.Namespace) -> tuple[LoadedScenario, list[Case]]:
    """The loaded scenario and the cases ``--case`` picks (all without it), after checking that the
    output root can be written (``--out``); raises ScenarioError or UserError before anything starts."""
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    loaded = load_file(args.scenario, overrides=scenario_overrides(args))
    cases = select_cases(loaded, args.case)
    check_output_folder(args.out, "--out")
    return loaded, cases
