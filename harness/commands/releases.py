"""``sglang-repro releases``: every sglang release from 0.5.12 to the newest, its build profile and its contract."""

from __future__ import annotations

import argparse
import json

from harness.util.errors import EXIT_OK, UserError

__all__ = ["DESCRIPTION", "add_arguments", "main"]

DESCRIPTION = (
    "For every sglang release on the package index from 0.5.12 to the newest (post releases included), or the "
    "VERSIONs given: its build profile (is PR #29616's fix present, when the Frozen-KV MTP draft runs eagerly, "
    "which backends a topk > 1 draft may use, whether trtllm_mha's graph path copies a stale out_cache_loc into its "
    "SWA buffer (each read with its guards: present-but-unreachable where a Frozen-KV MTP draft cannot run it), "
    "which flags are deprecated) and the contract's facts by status (holds / moved / changed / gone). Each "
    "release is read from its wheel (fetched --no-deps once, never installed) and cached per release. "
    "Exit status: 0, 2 bad input, 3 infra (the index or a wheel cannot be had)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("versions", nargs="*", metavar="VERSION", help="these releases only (default: the line)")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--format", choices=("text", "json"), default="text",
                     help="json: one object per release (version, fix_present, eager_rule, contract, ...)")
    out.add_argument("--markdown", action="store_true", help="the release table of docs/releases.md")


def _text(row: object) -> str:
    from harness.contract.release_line import ReleaseRow

    assert isinstance(row, ReleaseRow)
    counts = ", ".join(f"{n} {s}" for s, n in row.contract().items() if n)
    p = row.profile
    if p is None:
        return f"{row.version}: profile unavailable ({row.unavailable}); contract {counts}"
    dep = p.replacement("--disable-cuda-graph")
    flag = f"; --disable-cuda-graph deprecated for {dep.replacement}" if dep else ""
    reach = p.reach("swa_refill")
    blocked = [g for g in reach.guards if g.holds is False] if reach else []
    guard = f" ({blocked[0].test} at {blocked[0].where} cannot hold)" if blocked else ""
    return (f"{row.version}: fix {'present' if p.fix_present else 'absent'}; eager when {p.eager_rule}; topk > 1 "
            f"on {', '.join(p.topk_backends)}; trtllm_mha graph SWA refill {p.swa_refill}{guard}{flag}; contract {counts}")


def main(args: argparse.Namespace) -> int:
    from packaging.version import InvalidVersion, Version

    from harness.contract.release_line import markdown, release_line

    for version in args.versions:
        try:
            Version(version)
        except InvalidVersion:
            raise UserError(f"releases: {version!r} is not a release version (e.g. 0.5.13.post1)") from None
    rows = release_line(args.versions or None)
    if args.markdown:
        print(markdown(rows))
    elif args.format == "json":
        print(json.dumps([row.to_json() for row in rows], indent=1))
    else:
        for row in rows:
            print(_text(row))
    return EXIT_OK
