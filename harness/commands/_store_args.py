"""``--store URL`` / ``--no-store``, shared by the commands that record runs (run, compare, minimize)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from harness.store.url import default_store, redact_url, store_url

__all__ = ["add_store_arguments", "existing_store", "store_choice"]


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", metavar="URL",
                        help="record results here (default: $SGLANG_REPRO_STORE, else OUT/results.db)")
    parser.add_argument("--no-store", action="store_true", help="record nothing")


def store_choice(args: argparse.Namespace) -> str | None:
    """The store to record into, checked now (a URL that is not one, an unsupported database, an SQLite
    path that is a device or FIFO): bad input ends the command before any server starts."""
    if args.no_store:
        return None
    value = str(args.store or default_store(args.out))
    check_store_value(value)
    return value


def check_store_value(value: str) -> None:
    """UserError (exit 2) for a store value that can never be opened; reaching it is left to the writer."""
    from harness.store.store import check_sqlite_file

    url = store_url(value)
    if url.drivername == "sqlite":
        check_sqlite_file(Path(url.database or ""), redact_url(url))


def existing_store(value: str) -> None:
    """UserError (exit 2) when ``value`` names an SQLite store that does not exist: a command that only reads a store
    (store alerts/ack/resolve/export, dashboard) must not create an empty one at a mistyped path and call it done."""
    from harness.util.errors import UserError

    url = store_url(value)
    if url.drivername == "sqlite" and not os.path.lexists(url.database or ""):
        raise UserError(f"--store {url.database}: no such store; give an existing one (`store import` creates one)")
