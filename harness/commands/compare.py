"""sglang-repro compare SCENARIO: before vs after, expectations checked, statistics, reports."""

from __future__ import annotations

import argparse
import sys

from harness.commands._common import add_scenario_arguments, selected_cases
from harness.compare import compare_cases, role_specs
from harness.comparison import ComparisonReport
from harness.errors import UserError
from harness.legacy_outcome import RunResult

COMMAND = "compare"
HELP = "compare builds on a scenario (exit 0 expectations held, 1 not, 2 bad input, 3 infra)"
ORDER = 50


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_scenario_arguments(parser, trials_help="trials per case and role (default: the scenario's)")
    parser.add_argument("--before", metavar="SPEC", help="build spec of the 'before' role (default: the scenario's)")
    parser.add_argument("--after", metavar="SPEC", help="build spec of the 'after' role (default: the scenario's)")
    parser.add_argument("--build", action="append", default=[], metavar="ROLE=SPEC",
                        help="build spec of any role (repeatable)")
    parser.add_argument("--reference", action="store_true",
                        help="run each role's CPU reference-server revision instead of its real build")


def _overrides(args: argparse.Namespace) -> dict[str, str]:
    out = {}
    for item in args.build:
        role, sep, spec = item.partition("=")
        if not sep or not role or not spec:
            raise UserError(f"--build {item!r}: expected ROLE=SPEC, e.g. after=pip:sglang==0.5.15")
        out[role] = spec
    for role in ("before", "after"):
        if getattr(args, role):
            out[role] = getattr(args, role)
    return out


def _progress(result: RunResult) -> None:
    sig = f" {result.signature}" if result.signature else ""
    print(f"  {result.case['name']:<28} {result.build['role']:<8} trial {result.trial}: "
          f"{result.outcome}{sig}", file=sys.stderr, flush=True)


def summary(report: ComparisonReport) -> list[str]:
    """The short summary printed at the end: per case, what each role did and the verdict."""
    lines = []
    for case in report.cases:
        parts = []
        for role in case.roles:
            text = f"{role.role}: {role.outcome}"
            if role.signature:
                text += f" ({role.signature})"
            acc = role.passing_values("accept_length")
            tput = role.passing_values("output_throughput_tok_s")
            if acc:
                text += f", accept length {sum(acc) / len(acc):.2f}"
            if tput:
                text += f", {sum(tput) / len(tput):.1f} tok/s"
            parts.append(text)
        held = "expectations held" if case.expectations_held else "EXPECTATION NOT HELD"
        lines.append(f"{case.case}: {'; '.join(parts)} -> {held}; metrics {case.verdict}")
    return lines


def main(args: argparse.Namespace) -> int:
    loaded, cases = selected_cases(args)
    specs = role_specs(loaded, overrides=_overrides(args), reference=args.reference)
    print(f"comparing {loaded.scenario.name}: {len(cases)} case(s), roles "
          + ", ".join(f"{r}={s}" for r, s in specs.items()), file=sys.stderr, flush=True)
    outcome = compare_cases(loaded, cases, specs, trials=args.trials, out_root=args.out, progress=_progress)
    for line in summary(outcome.report):
        print(line)
    verdict = "every expectation held" if outcome.report.all_expectations_held else "an expectation did NOT hold"
    print(f"verdict: {verdict}")
    print(f"report: {outcome.paths['html']}")
    return outcome.exit_code
