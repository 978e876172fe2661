"""sglang-repro schema: the JSON Schema of the scenario format, for editors."""

from __future__ import annotations

import argparse
import json

from harness.scenario import Scenario

MAX_INDENT = 16  # bounded before work: the schema is ~3k lines, so each space of indent costs ~3k x depth bytes


def _indent(text: str) -> int:
    """``--indent``: 0 to 16 spaces (``--indent 999999999`` would write gigabytes of spaces)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number; give 0 to {MAX_INDENT}") from None
    if not 0 <= value <= MAX_INDENT:
        raise argparse.ArgumentTypeError(f"{value} is out of range; give 0 to {MAX_INDENT}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--indent", type=_indent, default=2, metavar="N",
                        help=f"spaces per JSON indent level, 0 to {MAX_INDENT} (default 2)")


def main(args: argparse.Namespace) -> int:
    schema = Scenario.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "sglang-repro scenario"
    print(json.dumps(schema, indent=args.indent))
    return 0
