"""Expectations (the design's word): what a scenario expects of each build role, and the one judge of whether it
held (:mod:`.judge`). Beside ``harness.compare``, on the floor below it: the pipeline judges each run here and
``compare`` judges each role, so neither imports the other for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.util.face import lazy_face

if TYPE_CHECKING:  # the face's names; each module is imported when one of its names is first used
    from harness.expectations.judge import ExpectationCheck, judge_role, judge_run, premise_gap, run_holds

__all__ = ["ExpectationCheck", "judge_role", "judge_run", "premise_gap", "run_holds"]
__getattr__ = lazy_face(__name__)
