"""What the harness assumes about SGLang, each fact with the real source line that backs it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.util.face import lazy_face

if TYPE_CHECKING:  # the face's names; each module is imported when one of its names is first used
    from harness.contract.check import (
        DRIFT,
        check_sources,
        contract_table,
        drifts_of,
        fact_statuses,
        reference_sources,
        sglang_package_of,
    )
    from harness.contract.facts import FACTS, HEALTH_PATH, HEALTH_PROBE_TIMEOUT_S, NEVER_GATES, READY_LINE, cited_files, needs
    from harness.contract.locate import STATUSES, Located
    from harness.contract.profile import BuildProfile, ProfileUnavailable, compute_profile, describe_profile
    from harness.contract.release_line import FIRST_RELEASE, ReleaseRow, release_row
    from harness.contract.render import in_build_words
    from harness.contract.sources import DirSources
    from harness.contract.wheels import WheelSources, cached_wheel, fetch_wheel, index_versions, wheel_dir

__all__ = ["DRIFT", "FACTS", "FIRST_RELEASE", "HEALTH_PATH", "HEALTH_PROBE_TIMEOUT_S", "NEVER_GATES", "READY_LINE", "STATUSES",
           "BuildProfile", "DirSources", "Located", "ProfileUnavailable", "ReleaseRow", "WheelSources", "cached_wheel",
           "check_sources", "cited_files", "compute_profile", "contract_table", "describe_profile", "drifts_of",
           "fact_statuses", "fetch_wheel", "in_build_words", "index_versions", "needs", "reference_sources", "release_row",
           "sglang_package_of", "wheel_dir"]
__getattr__ = lazy_face(__name__)
