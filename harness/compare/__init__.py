"""Before/after comparisons: running every case under each role, and the verdicts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.util.face import lazy_face

if TYPE_CHECKING:  # the face's names; each module is imported when one of its names is first used
    from harness.compare.runner import compare_cases, role_specs
    from harness.compare.verdicts import (
        DEFAULT_METRICS,
        CaseComparison,
        ComparisonReport,
        MetricComparison,
        MetricVerdict,
        RoleResult,
    )

__all__ = ["DEFAULT_METRICS", "CaseComparison", "ComparisonReport", "MetricComparison", "MetricVerdict", "RoleResult",
           "compare_cases", "role_specs"]
__getattr__ = lazy_face(__name__)
