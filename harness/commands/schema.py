"""sglang-repro schema: the JSON Schema of the scenario format, for editors."""

from __future__ import annotations

import argparse
import json

from harness.scenario import Scenario


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--indent", type=int, default=2, metavar="N", help="spaces per JSON indent level (default 2)")


def main(args: argparse.Namespace) -> int:
    schema = Scenario.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "sglang-repro scenario"
    print(json.dumps(schema, indent=args.indent))
    return 0
