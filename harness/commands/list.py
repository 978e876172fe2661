"""sglang-repro list PATH...: the cases after matrix expansion, with the command each would run."""

from __future__ import annotations

import argparse
import json
import shlex
from typing import Any

from harness.commands._common import add_set_argument, scenario_overrides
from harness.scenario import Case, load_paths, sglang_argv
from harness.util.redact import redact_argv, redact_env


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="scenario files or folders")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="text: a line per case and its SGLang command; json: every case as plain data")
    add_set_argument(parser)


def describe(case: Case) -> dict[str, Any]:
    """The plain-data view of a case that `list --format json` prints; secrets (``--api-key`` values,
    secret-named environment values) are redacted, since listings end up in CI logs."""
    sc = case.scenario
    return {
        "scenario": sc.name,
        "file": str(case.file),
        "case": case.name,
        "values": case.values,
        "argv": redact_argv(sglang_argv(sc)),
        "env": redact_env(sc.server.env),
        "prompt_tokens": sc.workload.prompt.lengths(),
        "requests": sc.workload.requests,
        "expect": {role: exp.model_dump() for role, exp in sc.expect.items()},
        "builds": {role: {"spec": b.spec, "sim": b.sim_spec} for role, b in sc.builds.items()},
        "hardware": sc.hardware.model_dump(),
        "markers": sc.markers,
    }


def main(args: argparse.Namespace) -> int:
    loaded = load_paths(args.paths, overrides=scenario_overrides(args))
    cases = [case for item in loaded for case in item.cases]
    if args.format == "json":
        print(json.dumps([describe(c) for c in cases], indent=2))
        return 0
    for row in ({**describe(c), "_case": c} for c in cases):
        expect = ", ".join(f"{role}: {exp.describe()}" for role, exp in row["_case"].scenario.expect.items())
        print(f"{row['file']}::{row['case']}  prompt_tokens={row['prompt_tokens']}  expect[{expect}]")
        print(f"    {shlex.join(row['argv'])}")
    return 0
