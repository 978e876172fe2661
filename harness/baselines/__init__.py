"""Recorded baselines (``fixtures/baselines/<scenario>.yaml``) and the checks judged against them.

- :mod:`.model`  the file format: an entry per case x hardware x build line, figures as mean and spread
- :mod:`.files`  reading (strict, file:line errors) and writing (stable, atomic, diffable)
- :mod:`.keys`   the hardware key and the build line a run is judged by
- :mod:`.check`  the band: a one-sided pooled t test at a stated false-failure rate
- :mod:`.judge`  an item's trials against an entry: a verdict per figure and draft position
- :mod:`.record` trials summarised into an entry, merged into the file keeping what it replaced
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.util.face import lazy_face

if TYPE_CHECKING:  # the face's names; each module is imported when one of its names is first used
    from harness.baselines.check import DEFAULT_FALSE_FAILURE_RATE
    from harness.baselines.files import BaselineFileError, baselines_path, load
    from harness.baselines.judge import judge_entry, missing_figures
    from harness.baselines.keys import build_line, hardware_key
    from harness.baselines.model import Entry, key_text
    from harness.baselines.record import apply, entry_from_runs, plan
    from harness.baselines.role import RoleBaselines, judge_role_baselines

__all__ = ["DEFAULT_FALSE_FAILURE_RATE", "BaselineFileError", "Entry", "RoleBaselines", "apply", "baselines_path", "build_line",
           "entry_from_runs", "hardware_key", "judge_entry", "judge_role_baselines", "key_text", "load", "missing_figures",
           "plan"]
__getattr__ = lazy_face(__name__)
