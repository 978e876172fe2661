"""Every option of every command says what it does in --help (the argparse tree walked, sub-sub-commands too)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from harness.cli import make_parser

REPO = Path(__file__).resolve().parents[1]


def _walk(parser: argparse.ArgumentParser, path: str) -> list[str]:
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helped = {a.dest for a in action._choices_actions if a.help}
            for name, sub in action.choices.items():
                if name not in helped:
                    missing.append(f"{path} {name}: no one-line help")
                missing += _walk(sub, f"{path} {name}")
        elif isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        elif not action.help or action.help == argparse.SUPPRESS:
            missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}: no help")
    return missing


def test_every_option_of_every_command_has_help() -> None:
    missing = _walk(make_parser(), "sglang-repro")
    assert not missing, "\n".join(missing)


def test_the_walk_sees_a_missing_help() -> None:
    """The walk itself can fail: an option without help is named."""
    parser = argparse.ArgumentParser(prog="x")
    parser.add_argument("--quiet", action="store_true")
    assert _walk(parser, "x") == ["x --quiet: no help"]


def test_a_closed_pipe_ends_quietly() -> None:
    """`sglang-repro list ... | head -1`: the reader leaves early; no traceback, exit 0."""
    proc = subprocess.Popen([sys.executable, "-m", "harness", "list", "scenarios/", "--format", "json"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # what `head -1` does after its line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, err
    assert first.strip() == b"[" and "Traceback" not in err and "BrokenPipe" not in err, err
