"""``sglang-repro bisect`` without argparse: releases and/or commits, then the report."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path

from harness.bisect.endpoints import EndpointError, establish
from harness.bisect.interrupted import INTERRUPTED_EXIT, interrupted_commits, interrupted_summary
from harness.bisect.oracle import Find, Limits, Target, Trial, Verdict
from harness.bisect.probe import Probe, SearchState, StepRecord, experiment_key, load_case, progress
from harness.bisect.release_plan import expect_per_release
from harness.bisect.releases import (
    order_versions,
    parse_range,
    search_releases,
    tag_for,
    versions_from_index,
)
from harness.bisect.report import BisectReport, write_report
from harness.bisect.session import CommitResult, Request, bisect_commits, new_bisect_id
from harness.bisect.step import expected_steps
from harness.executor.slurm import SlurmOptions
from harness.signatures.catalogue import Catalogue
from harness.store.store import new_batch
from harness.util.bounded_read import read_text
from harness.util.errors import EXIT_FAIL, EXIT_OK, UserError
from harness.util.interrupts import Shield, sigterm_as_ctrl_c, taken
from harness.util.paths import reports_root
from harness.util.proc import git
from harness.util.text import first_line

__all__ = ["BisectArgs", "run_bisect"]


@dataclass(frozen=True)
class BisectArgs:
    scenario: Path
    case: str | None
    repo: Path | None = None
    good: str | None = None
    bad: str | None = None
    releases: str | None = None
    versions: tuple[str, ...] | None = None
    release_build: str = "pip:sglang=={version}"
    signature: str | None = None
    metric: str | None = None
    threshold: float = 0.05
    find: Find = Find.REGRESSION
    limits: Limits = Limits()
    base: str | None = None
    out_root: Path | None = None
    store: str | None = None  # the results store: trials are recorded there and known ones reused; None: neither
    started: float = 0.0
    jobs: int = 1  # commits judged at once; 1 with the local executor: git bisect run
    slurm: SlurmOptions | None = None  # --executor slurm: each commit's probe a SLURM job


def _release_phase(args: BisectArgs, request: Request) -> tuple[list[str], tuple[StepRecord, ...], Target,
                                                                 tuple[str, str] | None, tuple[str, ...]]:
    assert args.releases is not None
    low, high = parse_range(args.releases)
    if "{version}" not in args.release_build:
        raise UserError(f"--release-build {args.release_build!r}: must contain {{version}}")
    listed = list(args.versions) if args.versions else versions_from_index()
    versions = order_versions(listed, low, high, where="--versions" if args.versions else "the package index")
    case = load_case(args.scenario, args.case)
    # Said in advance, from each release's profile (its wheel): where the bug should be, and why.
    for expectation in expect_per_release(case, versions, args.release_build):
        progress(f"plan {expectation.line()}")
    state = SearchState(
        scenario=str(args.scenario.absolute()), case=case.name, build_template=args.release_build, target=Target(),
        limits=args.limits, find=args.find, report_dir=str(request.report_dir.absolute()),
        store=request.store, batch=request.batch,
        experiment=experiment_key(read_text(args.scenario, "source"), case.name, args.release_build),
        expected_steps=expected_steps(len(versions) - 1), started=args.started,
        out_root=str(request.report_dir.absolute()))
    probe = Probe(state, case)
    old, new = versions[0], versions[-1]
    ends = {"good": old, "bad": new} if args.find is Find.REGRESSION else {"good": new, "bad": old}

    def spec(v: str) -> str:
        return args.release_build.replace("{version}", v)

    def trials_at(which: str, n: int) -> list[Trial]:
        progress(f"endpoint {which}: release {ends[which]} ({n} trial{'s' if n != 1 else ''})")
        return probe.trials(f"release:{ends[which]}", spec(ends[which]), n)

    endpoints = establish(trials_at, signature=args.signature, metric=args.metric, threshold=args.threshold,
                          limits=args.limits, catalogue=Catalogue.load())
    state = replace(state, target=endpoints.target)
    probe = Probe(state, case)
    steps = [StepRecord("endpoint", f"release:{ends[w]}", f"--{w} {ends[w]}", v, state.term(v), reason, trials, 0, 0.0)
             for w, v, trials, reason in (("good", Verdict.GOOD, endpoints.good, endpoints.good_reason),
                                          ("bad", Verdict.BAD, endpoints.bad, endpoints.bad_reason))]
    new_verdict = args.find.new_verdict
    found = search_releases(
        versions, lambda v, k: probe.judge(kind="release", revision=f"release:{v}", label=v, spec=spec(v), index=k),
        is_new=lambda r: r.verdict is new_verdict, started=args.started)
    steps += found.steps
    pair = (found.last_old, found.first_new) if found.last_old and found.first_new else None
    if pair:
        for v, want in ((pair[1], state.term(new_verdict)), (pair[0], state.term(
                Verdict.GOOD if new_verdict is Verdict.BAD else Verdict.BAD))):
            record = probe.judge(kind="confirm", revision=f"release:{v}", label=v, spec=spec(v),
                                 fresh_trials=args.limits.confirm_trials)
            steps.append(replace(record, extra={"expected": want, "held": record.term == want}))
    return versions, tuple(steps), endpoints.target, pair, found.candidates


def _request(args: BisectArgs, bisect_id: str) -> Request:
    """The search's request, its report folder made."""
    folder = (args.out_root or reports_root()) / "bisect" / bisect_id
    from harness.util.output_path import make_folder

    make_folder(folder, "the bisect report folder")
    progress(f"report folder {folder}")
    return Request(scenario=args.scenario, case=args.case, signature=args.signature, metric=args.metric,
                   threshold=args.threshold, find=args.find, limits=args.limits, report_dir=folder,
                   store=args.store, batch=new_batch("bisect", bisect_id), base=args.base)


def run_bisect(args: BisectArgs) -> BisectReport:
    started = args.started or time.time()
    args = replace(args, started=started)
    case = load_case(args.scenario, args.case)  # bad input fails here, before anything runs
    bisect_id = new_bisect_id(case.scenario.name)
    request = _request(args, bisect_id)
    folder = request.report_dir
    versions: list[str] = []
    release_steps: tuple[StepRecord, ...] = ()
    pair: tuple[str, str] | None = None
    commits: CommitResult | None = None
    target = Target(signature=args.signature, metric=args.metric)
    status, summary, code = "not-found", "", EXIT_FAIL
    commit_ends: tuple[str, str] | None = None  # the --good/--bad of the commit search, once it starts
    sigterm = sigterm_as_ctrl_c()  # SIGTERM ends the search as Ctrl-C does: with its report, exit 3
    sigterm.__enter__()
    try:
        if args.releases:
            versions, release_steps, target, pair, candidates = _release_phase(args, request)
            if pair is None:
                summary = f"only untestable releases were left: the change is in one of {', '.join(candidates)}"
                status = "ambiguous"
            else:
                held = all(s.extra.get("held", True) for s in release_steps if s.kind == "confirm")
                summary = (f"between releases {pair[0]} and {pair[1]}"
                           + ("" if held else " (NOT confirmed by fresh trials)"))
                status, code = "found", EXIT_OK if held else EXIT_FAIL
        if args.repo is not None and (not args.releases or pair is not None):
            good, bad = args.good, args.bad
            if pair is not None:
                tags = git(args.repo, "tag", "--list").splitlines()
                old_tag, new_tag = tag_for(pair[0], tags), tag_for(pair[1], tags)
                if old_tag is None or new_tag is None:
                    raise UserError(f"--repo {args.repo}: no tag for release {pair[0] if old_tag is None else pair[1]} "
                                    "(looked for vX, X, sglang-vX)")
                good, bad = (old_tag, new_tag) if args.find is Find.REGRESSION else (new_tag, old_tag)
            assert good is not None and bad is not None
            commit_ends = (good, bad)
            commits = _search_commits(args, request, good, bad)
            target = commits.target
            code, status, summary = _commit_summary(commits, prefix=f"{summary}; " if summary else "")
    except EndpointError as exc:
        status, summary, code = "endpoints-disagree", str(exc), exc.exit_code
    except KeyboardInterrupt as exc:  # issue 24: the report as far as it got, exit 3 (a second signal waits)
        taken()
        with Shield(reraise=False):
            if args.repo is not None and commit_ends is not None:
                commits = interrupted_commits(folder, args.repo, *commit_ends, args.find, target)
            status, code, summary = "interrupted", INTERRUPTED_EXIT, interrupted_summary(
                first_line(exc) or "SIGINT", f"{summary}; " if summary else "", commits)
    except UserError:
        if not (folder / "runs").exists():  # bad input found before anything ran: leave nothing behind
            shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        sigterm.__exit__(None, None, None)
    report = BisectReport(id=bisect_id, scenario=str(args.scenario), case=case.name, find=args.find, status=status,
                          summary=summary, exit_code=code, duration_s=time.time() - started, target=target,
                          commits=commits, release_steps=release_steps, releases=tuple(versions), release_pair=pair)
    return _written(report, folder)


def _written(report: BisectReport, folder: Path) -> BisectReport:
    with Shield(reraise=False):  # from here a signal only waits: the report is written whole
        md, _ = write_report(report, folder)
        print(f"{report.status.upper()}: {report.summary}\n        -> {md}", flush=True)
    return report


def _search_commits(args: BisectArgs, request: Request, good: str, bad: str) -> CommitResult:
    """git bisect run (``--jobs 1`` here), else the K-ary search with each probe a job (here or on SLURM)."""
    assert args.repo is not None
    if args.jobs == 1 and args.slurm is None:
        return bisect_commits(request, args.repo, good, bad)
    from harness.bisect.fleet import LocalProbes, ProbeRunner, SlurmProbes, bisect_commits_kary

    runner: ProbeRunner = (SlurmProbes(args.jobs, args.slurm) if args.slurm is not None
                           else LocalProbes(args.jobs, request.report_dir / "probes"))
    return bisect_commits_kary(request, args.repo, good, bad, runner)


def _unconfirmed_why(c: CommitResult) -> str:
    """Which confirmation did not come out as expected, with its trials: a newcomer told only "NOT confirmed"
    cannot tell a flaky other crash at the parent from a culprit that no longer fails."""
    failed = [s for s in c.steps if s.kind == "confirm" and not s.extra.get("held", True)]
    if not failed:
        return ": the first new commit has no parent in the range to compare it with" if c.culprit and \
            not c.culprit.parent else ""
    parts = []
    for s in failed:
        seen = ", ".join(f"{t.outcome.value}{' ' + t.signature if t.signature else ''}" for t in s.trials) or "none"
        parts.append(f"{s.revision[:12]} was {s.term}, expected {s.extra.get('expected')} ({s.reason}; "
                     f"trials: {seen})")
    return ": " + "; ".join(parts)


def _commit_summary(c: CommitResult, *, prefix: str) -> tuple[int, str, str]:
    new = c.terms[1]
    if c.culprit is not None:
        k = c.culprit
        text = (f"{prefix}first {new} commit {k.commit[:12]} \"{k.subject}\" ({k.author_date}); "
                + ("confirmed by fresh trials of it and its parent" if c.confirmed
                   else "NOT confirmed by fresh trials" + _unconfirmed_why(c)))
        return (EXIT_OK if c.confirmed else EXIT_FAIL), "found", text
    if c.candidates:
        return EXIT_FAIL, "ambiguous", (f"{prefix}only skipped commits were left: the first {new} commit is one of "
                                + ", ".join(x[:12] for x in c.candidates))
    return EXIT_FAIL, "not-found", f"{prefix}git bisect ended without a first {new} commit (see git-bisect-run.log)"
