"""sglang-repro dashboard: build the offline static site from the results store."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands._store_args import existing_store
from harness.dashboard.site import build_site
from harness.series.points import SERIES_KINDS
from harness.store.schema import RUN_KINDS
from harness.store.store import open_store
from harness.store.url import default_store
from harness.util.errors import InfraError, UserError, disk_full
from harness.util.output_path import check_output_folder


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", metavar="URL", help="default: $SGLANG_REPRO_STORE or the project's results.db")
    parser.add_argument("-o", "--output", type=Path, default=None, metavar="DIR",
                        help="where the site goes (default: dashboard/ in the project's reports folder)")
    parser.add_argument("--kinds", default=",".join(SERIES_KINDS), metavar="KIND,...",
                        help="the run kinds the charts and detection read (default: nightly; others: "
                             f"{', '.join(k for k in RUN_KINDS if k not in SERIES_KINDS)}); runs of other kinds are "
                             "listed apart")


def _kinds(text: str) -> tuple[str, ...]:
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    bad = [k for k in kinds if k not in RUN_KINDS]
    if bad or not kinds:
        raise UserError(f"--kinds {text}: {', '.join(bad) or 'no kind'} is not a run kind; valid: {', '.join(RUN_KINDS)}")
    return kinds


def main(args: argparse.Namespace) -> int:
    if args.output is None:  # the project's, wherever in it the command runs (harness.util.project_config)
        from harness.util.paths import reports_root

        args.output = reports_root() / "dashboard"
    check_output_folder(args.output, "-o")  # an existing file, device or FIFO is refused before the store opens
    if args.store:
        existing_store(args.store)  # it reads the store: a mistyped --store is refused, not created empty
    with open_store(args.store or default_store(), read_only=True) as store:  # a read-only mount is read as it is
        try:
            index = build_site(store, args.output, _kinds(args.kinds))
        except OSError as exc:
            if not disk_full(exc):
                raise
            raise InfraError(f"-o {args.output}: no space left on the device; the pages written before stay "
                             "whole (each is replaced atomically)") from None
    print(f"dashboard: {index}")
    return 0
