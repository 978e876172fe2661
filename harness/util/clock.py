"""The one clock for what the harness writes down: UTC, in one format each for names and for records.

A folder name carries the UTC moment it was made (``20261203T114610Z``: sortable, no separators a file system
or a shell minds, and the ``Z`` says which zone, so two machines in different zones name the same moment the
same way). A record's time is ISO 8601 in UTC to the second (``2026-12-03T11:46:10+00:00``); the store's own
bookkeeping keeps microseconds, because it orders batches written within one second.
"""

from __future__ import annotations

from datetime import datetime, timezone

__all__ = ["folder_stamp", "now_iso", "now_iso_exact"]


def folder_stamp() -> str:
    """The UTC moment as it starts a folder's name: ``YYYYmmddTHHMMSSZ``."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def now_iso() -> str:
    """The UTC moment as a record keeps it: ISO 8601 to the second, ``+00:00``."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def now_iso_exact() -> str:
    """The UTC moment to the microsecond, for orderings within one second (the store's batches)."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")
