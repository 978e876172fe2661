"""Before a server starts: the launcher seam (real SGLang or the reference server) and pre-flight."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.util.face import lazy_face

if TYPE_CHECKING:  # the face's names; each module is imported when one of its names is first used
    from harness.launch.launcher import Launcher, hardware_gap, launcher_for
    from harness.launch.preflight_batch import check_flags_up_front

__all__ = ["Launcher", "check_flags_up_front", "hardware_gap", "launcher_for"]
__getattr__ = lazy_face(__name__)
