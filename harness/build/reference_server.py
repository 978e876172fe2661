"""The core's one door to the CPU reference server (``harness/sim/``, a model of SGLang, not SGLang).

Nothing else under ``harness/`` imports ``harness.sim``: the builds, the launcher, pre-flight, minimize and the
demo history ask here. What the core needs to *name* a ``sim:`` build (its revisions, schedulers, the label
every report shows) is written here; the reference server keeps its own copies of the same words, and
``tests/sim/test_spelling.py`` holds the two equal. What the core needs from the server's *code* (its flag
parser, its knobs, its release rules, its tokenizer, its source folder) is imported lazily here, so that a
core command that never starts a reference server never imports it (and never needs torch).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.sim.release_rules import ReleaseRules

__all__ = ["FIRST_MODELLED", "KNOBS", "REFERENCE_SERVER_LABEL", "REVISIONS", "REVISION_RULES", "SCHEDULERS", "ReleaseRules",
           "check_rules_version", "default_rules", "encode_prompt", "flag_parser", "knobs", "rules_for", "source_dir"]

REVISIONS = ("pre-fix", "post-fix")
# The release whose rules each revision follows when its build names none (``rules=VERSION``): pre-fix stands
# for 0.5.14 (the last release without PR #29616), post-fix for 0.5.15 (the first with it). The launcher passes
# it, so a build's profile says which release's rules it ran (``harness.launch.build_profile``).
REVISION_RULES = {"pre-fix": "0.5.14", "post-fix": "0.5.15"}
# What computes the tokens: the tiny PyTorch model, or its torch-free stand-in (harness.sim.standin).
SCHEDULERS = ("model", "standin")
# How results and reports name it beside real builds.
REFERENCE_SERVER_LABEL = "reference server (CPU model, not SGLang)"
# Its build knobs (``--sim-<knob>``), written here so that reading a ``sim:`` spec (validate, list) imports no
# part of the server: its parser (harness.sim.cli_args.SIM_KNOBS) is the authority, tests/sim/test_spelling.py
# holds the two equal.
KNOBS = ("draft-agreement", "step-cost-ms", "device", "draft-cache", "seed", "rules", "position-drop", "scheduler", "gpu-sm")
# The oldest release whose rules it models (harness.sim.release_rules.FIRST_MODELLED, held equal by the same test).
FIRST_MODELLED = "0.5.12"
_RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:\.post(\d+))?$")  # release_rules.parse_release's syntax


def knobs() -> tuple[str, ...]:
    """The reference server's build knobs."""
    return KNOBS


def _release_key(text: str) -> tuple[int, int, int, int] | None:
    match = _RELEASE.match(text.strip())
    return None if match is None else (int(match[1]), int(match[2]), int(match[3]), int(match[4] or 0))


def check_rules_version(version: str) -> None:
    """ValueError, worded as :func:`rules_for`'s, when a ``rules=VERSION`` knob names no modelled release; checked
    without importing the server, for the quick commands."""
    key = _release_key(version)
    if key is None:
        raise ValueError(f"--sim-rules {version!r} is not a release number (e.g. 0.5.23 or 0.5.13.post1)")
    first = _release_key(FIRST_MODELLED)
    assert first is not None
    if key < first:
        raise ValueError(f"--sim-rules {version}: the reference server models releases from {FIRST_MODELLED} on")


def flag_parser() -> argparse.ArgumentParser:
    """The reference server's own launch-flag parser (SGLang's flags plus its ``--sim-*`` knobs)."""
    from harness.sim.cli_args import build_parser

    return build_parser()


def rules_for(version: str) -> ReleaseRules:
    """The release rules a ``rules=VERSION`` knob makes the reference server follow; ValueError for an unknown one."""
    from harness.sim.release_rules import rules_for as sim_rules_for  # plain data, no torch

    return sim_rules_for(version)


def default_rules() -> ReleaseRules:
    """The rules a reference server follows when its build names none."""
    from harness.sim.release_rules import DEFAULT_RULES

    return DEFAULT_RULES


def encode_prompt(text: str) -> list[int]:
    """``text`` as the reference server's tokenizer encodes it."""
    from harness.sim.tokenizer import ByteTokenizer

    return list(ByteTokenizer().encode(text))


def source_dir() -> Path:
    """The folder of the reference server's own modules (its code digest, the demo history's copy)."""
    return Path(__file__).resolve().parent.parent / "sim"
