"""The plugin's own hook: how one trial of an item is run.

The plugin implements it (:mod:`harness.pytest_plugin.runner`: resolve the build, then
``harness.pipeline.execute_run``). A conftest may implement it first to run items differently; the
plugin's gating, GPU leasing, judging and reporting stay the same around it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from harness.records.run_record import RunRecord
    from harness.scenario import Case

__all__ = ["pytest_sglang_repro_run"]


@pytest.hookspec(firstresult=True)
def pytest_sglang_repro_run(
    item: pytest.Item, case: Case, role: str, spec: str, trial: int, gpus: Sequence[int]
) -> RunRecord | None:
    """Run ``case`` once on the build ``spec`` (role ``role``) and return its result.

    ``gpus`` are the NVML indices the plugin has leased for the item (empty for the reference
    server); the lease is held until the item's last trial ends. Raise
    ``harness.util.errors.InfraError`` when the run cannot even be tried: the item is skipped as infra.
    """
