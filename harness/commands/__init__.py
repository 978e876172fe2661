"""One module per sub-command, named in :data:`COMMANDS`. Each module defines
``add_arguments(parser)`` and ``main(args) -> int`` (and may define ``DESCRIPTION``); the work
itself lives in plain functions elsewhere in the package so tests can call it without argparse.

The registry names each command and its one-line help without importing it: the CLI imports only
the module of the command that runs, so ``validate`` never pays for the statistics of ``compare``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

__all__ = ["COMMANDS", "Command", "find", "load"]


@dataclass(frozen=True)
class Command:
    """A sub-command: its name, the module ``harness.commands.<module>`` and its one-line help."""

    name: str
    module: str
    help: str
    # It writes no file and starts no process: run as the process, it is spared the interpreter's last
    # collection (harness.cli.entry).
    reads_only: bool = False

    def load(self) -> ModuleType:
        """The command's module, imported now (with whatever the command needs)."""
        return importlib.import_module(f"{__name__}.{self.module}")


# In the order `--help` lists them.
COMMANDS: tuple[Command, ...] = (
    Command("validate", "validate", "check scenario files (exit 0 all valid, 2 otherwise, one error per line)",
            reads_only=True),
    Command("list", "list", "list the cases of scenario files after matrix expansion"),
    Command("schema", "schema", "print the JSON Schema of the scenario format"),
    Command("prepare", "prepare", "create builds' environments ahead of time (cached) and print each build"),
    Command("run", "run",
            "run a scenario's cases against a build (exit 0 pass, 1 fail/crash, 2 bad input, 3 infra/timeout)"),
    Command("compare", "compare",
            "compare builds on a scenario (exit 0 expectations held, 1 not, 2 bad input, 3 infra)"),
    Command("triage", "triage", "match existing server logs against the crash-signature catalogue"),
    Command("metrics", "metrics", "recompute a run's workload metrics from its requests.jsonl"),
    Command("contract", "contract",
            "check the harness's contract with SGLang against a build's sglang sources (exit 0 all facts hold, "
            "1 a fact does not, 2 bad input, 3 infra)"),
    Command("releases", "releases",
            "every sglang release from 0.5.12 to the newest: its build profile (fix present, eager rule, ...) and "
            "its contract by status, read from the wheels (exit 0, 2 bad input, 3 infra)"),
    Command("minimize", "minimize",
            "shrink a failing case while the same failure reproduces (exit 0 written, 1 does not fail, "
            "2 bad input, 3 infra)"),
    Command("nightly", "nightly",
            "run every case of the scenarios on one build, record, detect (exit 0 nothing new, 1 new incident, "
            "3 infra)"),
    Command("store", "store", "the results store: import run folders, export (parquet, csv, hud), alerts"),
    Command("dashboard", "dashboard", "build the offline nightly dashboard (a static site) from the results store"),
    Command("ci-matrix", "ci_matrix", "print the CI job matrix of scenarios, sharded by hardware and duration"),
    Command("bisect", "bisect",
            "find the commit or release that broke (or, with --find fix, fixed) a case: a crash signature or a "
            "metric (exit 0 found and confirmed, 1 not, 2 bad input, 3 infra)"),
    Command("config", "config", "print the project's effective configuration, each value with its source (exit 0, 2 bad)",
            reads_only=True),
    Command("init", "init",
            "scaffold a project in a repository: configuration, one scenario, baselines folder, CI workflow "
            "(never overwrites; exit 0, 2 bad input)"),
    Command("issue", "issue",
            "write an upstream report (issue.md in SGLang's bug template, with attachments) from a run, comparison, "
            "nightly incident, bisection or minimization (exit 0 written, 2 bad input, 3 infra, 4 a known bug)"),
    Command("baselines", "baselines",
            "record a scenario's acceptance-length baselines per hardware and build line (shows the change first)"),
)  # fmt: skip


def find(name: str) -> Command | None:
    """The command called ``name``, or None."""
    return next((cmd for cmd in COMMANDS if cmd.name == name), None)


def load(name: str) -> ModuleType:
    """The module of the command called ``name``; raises KeyError for an unknown name."""
    cmd = find(name)
    if cmd is None:
        raise KeyError(name)
    return cmd.load()
