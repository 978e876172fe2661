"""Triage: which known crash a pasted text shows, how sure (levels), whether its release has the fix (verdicts),
and the fixtures that hold those answers (bless). The catalogue it judges against is :mod:`harness.signatures`;
the command ``sglang-repro triage`` is a thin adapter over this package."""

from harness.triage.bless import bless
from harness.triage.levels import LEVELS, Candidate, Finding, Level, judge_text, rank
from harness.triage.read import triage
from harness.triage.render import print_text, to_json
from harness.triage.verdicts import FileVerdict, Group, Judged, triage_text

__all__ = ["LEVELS", "Candidate", "FileVerdict", "Finding", "Group", "Judged", "Level", "bless", "judge_text", "print_text",
           "rank", "to_json", "triage", "triage_text"]
