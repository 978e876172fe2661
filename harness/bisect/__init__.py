"""Bisection: the commit or release that broke something (or fixed it), found with an oracle that says
bad only for the failure searched. Modules: ``worktree`` (the guarded temporary linked worktree),
``guard`` (its watchdog), ``oracle`` (good / bad / skip from trials), ``sequential`` (the metric test),
``endpoints`` (both ends verified first), ``probe`` (one revision; its trials are run records in the
results store, known ones reused), ``step`` (the script ``git bisect run`` calls), ``session`` (commits),
``releases``, ``report``, ``run``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.util.face import lazy_face

if TYPE_CHECKING:  # the face's names; each module is imported when one of its names is first used
    from harness.bisect.oracle import Find, Limits, Trial, Verdict
    from harness.bisect.probe import StepRecord
    from harness.bisect.run import BisectArgs, run_bisect
    from harness.bisect.worktree import clean_stale

__all__ = ["BisectArgs", "Find", "Limits", "StepRecord", "Trial", "Verdict", "clean_stale", "run_bisect"]
__getattr__ = lazy_face(__name__)
