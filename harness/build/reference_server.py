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
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.sim.release_rules import ReleaseRules

__all__ = ["REFERENCE_SERVER_LABEL", "REVISIONS", "REVISION_RULES", "SCHEDULERS", "ReleaseRules", "default_rules",
           "encode_prompt", "flag_parser", "knobs", "rules_for", "source_dir"]

REVISIONS = ("pre-fix", "post-fix")
# The release whose rules each revision follows when its build names none (``rules=VERSION``): pre-fix stands
# for 0.5.14 (the last release without PR #29616), post-fix for 0.5.15 (the first with it). The launcher passes
# it, so a build's profile says which release's rules it ran (``harness.launch.build_profile``).
REVISION_RULES = {"pre-fix": "0.5.14", "post-fix": "0.5.15"}
# What computes the tokens: the tiny PyTorch model, or its torch-free stand-in (harness.sim.standin).
SCHEDULERS = ("model", "standin")
# How results and reports name it beside real builds.
REFERENCE_SERVER_LABEL = "reference server (CPU model, not SGLang)"
# Its knobs (``--sim-<knob>``) when its parser cannot be imported (the `sim` extra, torch, is not installed).
_KNOBS_FALLBACK = ("draft-agreement", "step-cost-ms", "device", "draft-cache", "seed", "gpu-sm", "rules", "position-drop")


def knobs() -> tuple[str, ...]:
    """The reference server's build knobs; its parser is the authority."""
    try:
        from harness.sim.cli_args import SIM_KNOBS
    except ImportError:
        return _KNOBS_FALLBACK
    return tuple(SIM_KNOBS)


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
