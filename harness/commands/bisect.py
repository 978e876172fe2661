"""sglang-repro bisect SCENARIO: the commit (or release) that broke it, or fixed it (``--find fix``)."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from harness.bisect.oracle import Find
from harness.util.argtypes import positive_int
from harness.util.errors import UserError

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
    parser.add_argument("scenario", type=Path, nargs="?", metavar="SCENARIO",
                        help="a scenario file (not needed with --cleanup)")
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
    parser.add_argument("--jobs", type=positive_int, default=1, metavar="K",
                        help="judge K commits of the remaining range at once (a K-ary search: about log_(K+1) N "
                             "rounds instead of log_2 N), each one job; 1 (default): git bisect run")
    from harness.commands._common import add_set_argument
    from harness.executor.options import add_executor_arguments
    from harness.util.progress import NO_PROGRESS_HELP

    add_executor_arguments(parser)
    add_set_argument(parser)
    parser.add_argument("--no-progress", action="store_true",
                        help=NO_PROGRESS_HELP + " (bisect's step lines are always plain: each step is news)")
    parser.add_argument("--cleanup", action="store_true",
                        help="with --repo: only remove what an earlier bisect of the checkout killed with its guard "
                             "left (its temporary clone; from older versions a worktree in .git), and exit")


def known_metrics() -> frozenset[str]:
    """Every metric name a run record can carry: the workload's (derive_metrics), the server's figures,
    and the run's own timings."""
    from harness.measure.client_side import derive_metrics
    from harness.records.metric_definitions import METRICS, RUN_FIGURES

    return frozenset(derive_metrics([])) | frozenset(METRICS) | frozenset(RUN_FIGURES)


def _check_target(args: argparse.Namespace) -> None:
    """``--metric`` and ``--signature`` name something that exists, before either endpoint runs."""
    if args.metric is not None and args.metric not in known_metrics():
        close = sorted(m for m in known_metrics() if args.metric.lower() in m or m in args.metric.lower())[:5]
        raise UserError(f"--metric {args.metric}: not a metric a run records"
                        + (f" (did you mean {', '.join(close)}?)" if close else "; e.g. output_throughput_tok_s"))
    if args.signature is not None:
        from harness.signatures.catalogue import Catalogue

        catalogue = Catalogue.load()
        if args.signature not in catalogue.ids:
            raise UserError(f"--signature {args.signature}: not in the catalogue {catalogue.source}")


def _check_revisions(args: argparse.Namespace) -> None:
    """A --good or --bad that is no commit of --repo is bad input: refused before anything is written."""
    if args.releases is None:
        from harness.bisect.worktree import resolve_commit

        resolve_commit(args.repo, args.good, "--good")
        resolve_commit(args.repo, args.bad, "--bad")


def _with_overrides(args: argparse.Namespace) -> Path:
    """The scenario file the search reads: the user's, or with ``--set`` a copy with the overrides applied
    (each step of ``git bisect run`` reads the file again, so the overrides must be in it)."""
    from harness.commands._common import scenario_overrides

    sets = scenario_overrides(args)
    if not sets:
        return Path(args.scenario)
    from harness.scenario.overrides import SECRET_SETS_ENV, is_secret_set, write_overridden
    from harness.util.paths import reports_root

    copy = write_overridden(Path(args.scenario), sets, (args.out or reports_root()) / "bisect" / "scenarios")
    secret = [s.text for s in sets if is_secret_set(s)]
    if secret:  # the copy holds none of them: every process of the search (steps, probes) inherits them from here
        os.environ[SECRET_SETS_ENV] = json.dumps(secret)
    return copy


def main(args: argparse.Namespace) -> int:
    from harness.scenario.overrides import SECRET_SETS_ENV

    before = os.environ.get(SECRET_SETS_ENV)
    try:
        return _main(args)
    finally:  # the secret overrides are this search's: not left for a later command of the same process (a test)
        if before is None:
            os.environ.pop(SECRET_SETS_ENV, None)
        else:
            os.environ[SECRET_SETS_ENV] = before


def _main(args: argparse.Namespace) -> int:
    from harness.bisect.oracle import Limits
    from harness.bisect.run import BisectArgs, run_bisect
    from harness.commands._store_args import check_store_value
    from harness.store.url import default_store
    from harness.util.output_path import check_output_folder

    if args.cleanup:
        from harness.bisect.worktree import clean_stale

        if args.repo is None:
            raise UserError("--cleanup needs --repo CHECKOUT")
        if not args.repo.is_dir():  # a FIFO, a file, a missing path: no checkout, nothing cleaned
            raise UserError(f"--repo {args.repo}: not a folder; give a git checkout")
        removed = clean_stale(args.repo)
        for path in removed:
            print(f"removed the stale bisect worktree {path}")
        print(f"{len(removed)} stale bisect worktree(s) removed from {args.repo}")
        return 0
    if args.scenario is None:
        raise UserError("bisect needs SCENARIO (a scenario file)")
    if args.releases is None and (args.repo is None or args.good is None or args.bad is None):
        raise UserError("bisect needs --repo CHECKOUT --good REV --bad REV, or --releases A..B")
    if args.releases is not None and (args.good or args.bad):
        raise UserError("--good/--bad are for commits; with --releases the range is A..B")
    if args.versions and not args.releases:
        raise UserError("--versions needs --releases A..B")
    _check_target(args)
    check_output_folder(args.out, "--out")
    # Absolute from here: `git bisect run` steps and probe jobs run in other folders (a worktree, a job's), where
    # a relative --out or --store would name another place (issue 37: state.json not found, the steps' rows lost).
    args.out = args.out.absolute() if args.out is not None else None
    args.scenario = args.scenario.absolute()
    args.repo = args.repo.absolute() if args.repo is not None else None
    _check_revisions(args)
    scenario = _with_overrides(args)
    store = None if args.no_cache else str(args.store or default_store(args.out))
    if store is not None:
        check_store_value(store)  # a bad URL is bad input, found before anything runs
        if "://" not in store:  # an SQLite path ($SGLANG_REPRO_STORE too): absolute, as --out
            store = os.path.abspath(os.path.expanduser(store))
    slurm = None
    if args.executor == "slurm":
        from harness.executor.options import slurm_executor, slurm_store
        from harness.util.paths import reports_root

        if args.releases is not None:
            raise UserError("bisect --executor slurm searches commits (--repo --good --bad); --releases runs here")
        store = slurm_store(store, "bisect")  # SQLite refused: every job records its trials itself
        slurm = slurm_executor(args, (args.out or reports_root()).resolve(), "bisect").options
    limits = Limits(trials=args.trials, max_trials=max(args.max_trials, args.trials),
                    confirm_trials=args.confirm_trials)
    report = run_bisect(BisectArgs(
        scenario=scenario, case=args.case, repo=args.repo, good=args.good, bad=args.bad,
        releases=args.releases, versions=tuple(v.strip() for v in args.versions.split(",") if v.strip())
        if args.versions else None, release_build=args.release_build, signature=args.signature,
        metric=args.metric, threshold=args.threshold, find=Find(args.find), limits=limits, base=args.base,
        out_root=args.out, store=store, started=time.time(), jobs=args.jobs, slurm=slurm))
    return report.exit_code
