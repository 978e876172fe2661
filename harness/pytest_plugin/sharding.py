"""``--shard K/N``: a deterministic slice of the selected items, for CI matrix jobs.

Items are dealt round-robin in collection order after ``-m``/``-k`` deselection, so the N shards
are disjoint, together hold every selected item exactly once, and differ in size by at most one.
Every xdist worker collects the same items in the same order, so each computes the same slice.
"""

from __future__ import annotations

import pytest

from harness.pytest_plugin.options import settings

__all__ = ["shard"]


def shard(items: list[pytest.Item], k: int, n: int) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """(kept, deselected) for shard ``k`` of ``n`` (1-based)."""
    kept = [it for i, it in enumerate(items) if i % n == k - 1]
    dropped = [it for i, it in enumerate(items) if i % n != k - 1]
    return kept, dropped


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    chosen = settings(config).shard
    if chosen is None:
        return
    kept, dropped = shard(items, *chosen)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept


def pytest_report_header(config: pytest.Config) -> str | None:
    chosen = settings(config).shard
    return f"sglang-repro: shard {chosen[0]}/{chosen[1]}" if chosen else None
