"""sglang-repro bisect SCENARIO: the commit (or release) that broke it, or fixed it (``--find fix``)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from harness.argtypes import positive_int
from harness.bisect.oracle import Find
from harness.errors import UserError

DESCRIPTION = ("The commit or release that introduced (or, with --find fix, fixed) a crash signature or a metric "
               "change, searched with git bisect run in a temporary worktree; the checkout never moves. "
               "Exit 0 found and confirmed, 1 not found or not confirmed, 2 bad input, 3 infra.")


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value < 10.0:
        raise argparse.ArgumentTypeError(f"{text} must be a relative change in [0, 10), e.g. 0.05 for 5%")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenario", type=Path, metavar="SCENARIO", help="a scenario file")
    parser.add_argument("--case", metavar="NAME", help="the one case to search (axis=label[,axis=label])")
    parser.add_argument("--repo", type=Path, metavar="CHECKOUT",
                        help="an SGLang checkout (python/sglang/) or a checkout of sglang-repro (harness/sim/)")
    parser.add_argument("--good", metavar="REV", help="a revision without the bug")
    parser.add_argument("--bad", metavar="REV", help="a revision with the bug")
    parser.add_argument("--releases", metavar="A..B", help="search released packages from version A to B")
    parser.add_argument("--versions", metavar="V,V,...", help="the releases, instead of asking the package index")
    parser.add_argument("--release-build", metavar="TEMPLATE", default="pip:sglang=={version}",
                        help="the build of a release; {version} is filled in (default: pip:sglang=={version})")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--signature", metavar="ID", help="the crash signature that means bad "
                                                        "(default: the one the bad endpoint shows)")
    what.add_argument("--metric", metavar="NAME", help="search a metric change, e.g. output_throughput_tok_s")
    parser.add_argument("--threshold", type=_fraction, default=0.05, metavar="X",
                        help="with --metric: the smallest relative change between the endpoints (default 0.05)")
    parser.add_argument("--find", choices=[f.value for f in Find], default=Find.REGRESSION.value,
                        help="fix: find the first commit where the bug is gone (git's old/new terms)")
    parser.add_argument("--trials", type=positive_int, default=3, metavar="N", help="trials per endpoint (default 3)")
    parser.add_argument("--max-trials", type=positive_int, default=8, metavar="N",
                        help="trials at one step before it is skipped as undecided (default 8)")
    parser.add_argument("--confirm-trials", type=positive_int, default=3, metavar="N",
                        help="fresh trials for the culprit and its parent at the end (default 3)")
    parser.add_argument("--base", metavar="PYTHON", help="with an SGLang --repo: the base interpreter of src: builds")
    memory = parser.add_mutually_exclusive_group()
    memory.add_argument("--store", metavar="URL", help="record every trial in this results store and reuse the known "
                                                       "ones (default: $SGLANG_REPRO_STORE, else OUT/results.db)")
    memory.add_argument("--no-cache", action="store_true",
                        help="neither read nor write known trials (no results store is used)")
    parser.add_argument("--out", type=Path, metavar="DIR", help="output root (default: reports/)")


def main(args: argparse.Namespace) -> int:
    from harness.bisect.oracle import Limits
    from harness.bisect.run import BisectArgs, run_bisect
    from harness.store.url import default_store, store_url

    if args.releases is None and (args.repo is None or args.good is None or args.bad is None):
        raise UserError("bisect needs --repo CHECKOUT --good REV --bad REV, or --releases A..B")
    if args.releases is not None and (args.good or args.bad):
        raise UserError("--good/--bad are for commits; with --releases the range is A..B")
    if args.versions and not args.releases:
        raise UserError("--versions needs --releases A..B")
    store = None if args.no_cache else str(args.store or default_store(args.out))
    if store is not None:
        store_url(store)  # a bad URL is bad input, found before anything runs
    limits = Limits(trials=args.trials, max_trials=max(args.max_trials, args.trials),
                    confirm_trials=args.confirm_trials)
    report = run_bisect(BisectArgs(
        scenario=args.scenario, case=args.case, repo=args.repo, good=args.good, bad=args.bad,
        releases=args.releases, versions=tuple(v.strip() for v in args.versions.split(",") if v.strip())
        if args.versions else None, release_build=args.release_build, signature=args.signature,
        metric=args.metric, threshold=args.threshold, find=Find(args.find), limits=limits, base=args.base,
        out_root=args.out, store=store, started=time.time()))
    return report.exit_code
