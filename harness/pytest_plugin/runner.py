"""The plugin's own ``pytest_sglang_repro_run``: resolve the build once per session, then run.

``harness.pipeline`` and ``harness.build`` are imported on first use, so collecting (``--collect-only``,
``-m``) never pays for them and never depends on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pytest

from harness.util.errors import HarnessError

if TYPE_CHECKING:
    from harness.records.run_record import RunRecord
    from harness.scenario import Case

__all__ = ["close_pool", "pytest_sglang_repro_run"]

_BUILDS = pytest.StashKey[dict[str, Any]]()
# The item's trials share servers (when the scenario allows); closed when the item ends.
_POOL = pytest.StashKey[Any]()


def _resolve(config: pytest.Config, spec: str) -> Any:
    """The resolved build of ``spec``; a failure is remembered, not retried for every item."""
    cache = config.stash.setdefault(_BUILDS, {})
    if spec not in cache:
        from harness.build import resolve_build

        try:
            cache[spec] = resolve_build(spec)
        except HarnessError as exc:
            cache[spec] = exc
    found = cache[spec]
    if isinstance(found, HarnessError):
        # The same exception again, with its original traceback chained: constructors may differ.
        raise found.with_traceback(found.__traceback__)
    return found


def _options(gpus: Sequence[int]) -> Any:
    from harness.pipeline import RunOptions

    return RunOptions(progress=False, gpus=tuple(gpus) if gpus else None)


@pytest.hookimpl(trylast=True)
def pytest_sglang_repro_run(
    item: pytest.Item, case: Case, role: str, spec: str, trial: int, gpus: Sequence[int]
) -> RunRecord:
    from harness.pipeline import execute_run
    from harness.server.pool import ServerPool
    from harness.util.paths import reports_root

    build = _resolve(item.config, spec)
    pool = item.stash.setdefault(_POOL, ServerPool(reports_root()))
    return execute_run(case, build, role=role, trial=trial, options=_options(gpus), pool=pool)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """One parser process per real build for the whole session: every selected item's flags at once."""
    if session.config.option.collectonly:
        return
    from harness.pytest_plugin.items import ScenarioItem

    by_spec: dict[str, list[Case]] = {}
    for item in session.items:
        if isinstance(item, ScenarioItem) and not item.reference:
            by_spec.setdefault(item.spec, []).append(item.case)
    if not by_spec:
        return
    from harness.launch.preflight_batch import check_flags_up_front

    for spec, cases in by_spec.items():
        check_flags_up_front(cases, [spec])


def close_pool(item: pytest.Item) -> None:
    """Tear down the servers the item's trials shared: called while the item still holds its GPU lease."""
    pool = item.stash.get(_POOL, None)
    if pool is not None:
        pool.close()
        del item.stash[_POOL]
