"""sglang-repro list PATH...: the cases after matrix expansion, with the command each would run.

``--build SPEC`` shows each case in that build's words, as pre-flight will run it: a flag the build deprecates
written as its replacement (``harness.contract.render``), with a note naming where the build says so. A
``pip:sglang==X`` build is read from its wheel (fetched ``--no-deps`` once, never installed; the release line's
cache), a ``python:``/``src:`` build from its installed sources; the reference server takes a scenario's words as
they are.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
from typing import Any

from harness.commands._common import add_set_argument, scenario_overrides
from harness.scenario import Case, load_paths, sglang_argv
from harness.util.errors import UserError
from harness.util.redact import redact_argv, redact_env


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="scenario files or folders")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="text: a line per case and its SGLang command; json: every case as plain data")
    parser.add_argument("--build", metavar="SPEC",
                        help="show each case in this build's words (a flag it deprecates written as its replacement), "
                             "e.g. --build pip:sglang==0.5.23 (read from the release's wheel, never installed)")
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
        "argv": redact_argv(sglang_argv(sc), sc.server.env),  # a secret variable's value reappearing in argv too
        "env": redact_env(sc.server.env),
        "prompt_tokens": sc.workload.prompt.lengths(),
        "requests": sc.workload.requests,
        "expect": {role: exp.model_dump() for role, exp in sc.expect.items()},
        "builds": {role: {"spec": b.spec, "sim": b.sim_spec if b.sim is not None else None} for role, b in sc.builds.items()},
        "hardware": sc.hardware.model_dump(),
        "markers": sc.markers,
    }


def _profile_of(spec: str) -> Any:
    """The build profile ``spec``'s words come from (a BuildProfile), or None for the reference server; UserError
    for a spec that does not parse, InfraError where the build's sources cannot be had."""
    from harness.build import parse_build_spec, resolve_build
    from harness.contract.profile import BuildProfile
    from harness.contract.release_line import release_row
    from harness.launch.build_profile import build_profile
    from harness.util.errors import InfraError

    parsed = parse_build_spec(spec)
    if parsed.kind in ("sim", "simsrc"):
        return None
    if parsed.kind == "pip":
        row = release_row(parsed.fields["version"])
        if row.profile is None:
            raise InfraError(f"--build {spec}: the release's profile cannot be read: {row.unavailable}")
        return row.profile
    data = build_profile(resolve_build(parsed))
    if "unavailable" in data:
        raise InfraError(f"--build {spec}: the build's profile cannot be read: {data['unavailable']}")
    return BuildProfile.from_json(data)


def in_build_words(cases: list[Case], spec: str) -> tuple[list[Case], list[str]]:
    """``cases`` with their server args in ``spec``'s words, and the notes (once each) of what was rewritten."""
    from harness.contract.render import in_build_words as render

    profile = _profile_of(spec)
    if profile is None:
        return cases, []
    out, notes = [], []
    for case in cases:
        rendered = render(case.scenario.server.args, profile)
        notes += [n for n in rendered.notes if n not in notes]
        server = case.scenario.server.model_copy(update={"args": rendered.args})
        out.append(dataclasses.replace(case, scenario=case.scenario.model_copy(update={"server": server})))
    return out, notes


def main(args: argparse.Namespace) -> int:
    loaded = load_paths(args.paths, overrides=scenario_overrides(args))
    cases = [case for item in loaded for case in item.cases]
    notes: list[str] = []
    if args.build:
        if not args.build.strip():
            raise UserError("--build: empty build spec")
        cases, notes = in_build_words(cases, args.build)
    if args.format == "json":
        print(json.dumps([{**describe(c), **({"build": args.build, "build_notes": notes} if args.build else {})}
                          for c in cases], indent=2))
        return 0
    for note in notes:
        print(f"list: {note}", file=sys.stderr)
    for row in ({**describe(c), "_case": c} for c in cases):
        expect = ", ".join(f"{role}: {exp.describe()}" for role, exp in row["_case"].scenario.expect.items())
        print(f"{row['file']}::{row['case']}  prompt_tokens={row['prompt_tokens']}  expect[{expect}]")
        print(f"    {shlex.join(row['argv'])}")
    return 0
