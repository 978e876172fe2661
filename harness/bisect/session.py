"""A bisection over the commits of a checkout, driven by git's own ``git bisect run``.

1. Resolve the endpoints in the user's repository (read-only) and tell its layout: an SGLang
   checkout (``python/sglang/``: each revision runs as ``src:TREE``) or a checkout of sglang-repro
   (``harness/sim/``: each revision runs its own reference server, ``simsrc:TREE``).
2. Make a guarded temporary linked worktree; run both endpoints there (``endpoints.establish``).
3. ``git bisect start`` (git's old/new terms for ``--find fix``) and ``git bisect run`` with
   ``python -P -m harness.bisect.step STATE`` as the script, in that worktree only.
4. Run the first new commit and its parent again with fresh trials to confirm.
5. Remove the worktree (also on Ctrl-C; the guard does it on SIGKILL) and return the result.
"""

from __future__ import annotations

import functools
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from harness.bisect.endpoints import Endpoints, establish
from harness.bisect.oracle import Find, Limits, Target, Trial, Verdict
from harness.bisect.probe import Probe, SearchState, StepRecord, experiment_key, load_case, progress
from harness.bisect.sequential import endpoint_difference, without_stalls
from harness.bisect.step import append_step, expected_steps, read_steps
from harness.bisect.worktree import (
    PACKAGE_ROOT,
    BisectWorktree,
    argv_of_step,
    layout_of,
    resolve_commit,
)
from harness.records.outcome import Outcome
from harness.signatures.catalogue import Catalogue
from harness.store.store import Batch, new_batch
from harness.store.url import STORE_ENV
from harness.util.atomic import write_atomic
from harness.util.bounded_read import read_bytes, read_text
from harness.util.clock import folder_stamp
from harness.util.errors import UserError
from harness.util.interrupts import Shield
from harness.util.kill import end_group, signal_group
from harness.util.proc import git, is_ancestor

__all__ = ["CommitResult", "Request", "bisect_commits", "confirm_culprit", "culprit_of", "new_bisect_id", "ordered_ends",
           "record_endpoints", "resolve_endpoints"]

_FOUND = re.compile(r"^([0-9a-f]{40}) is the first (\S+) commit", re.MULTILINE)
_AMBIGUOUS = re.compile(r"The first (\S+) commit could be any of:\n((?:[0-9a-f]{40}\n?)+)", re.MULTILINE)


@dataclass(frozen=True)
class Request:
    """What the user asked for (the CLI's arguments as plain data)."""

    scenario: Path
    case: str | None
    signature: str | None = None
    metric: str | None = None
    threshold: float = 0.05
    find: Find = Find.REGRESSION
    limits: Limits = field(default_factory=Limits)
    report_dir: Path = Path("reports/bisect/x")
    store: str | None = None  # the results store of the trials (recorded, and known ones reused); None: neither
    batch: Batch = field(default_factory=lambda: new_batch("bisect"))
    base: str | None = None  # base interpreter for an SGLang checkout's src: builds


@dataclass(frozen=True)
class Culprit:
    commit: str
    subject: str
    author: str
    author_date: str
    files: tuple[str, ...]
    parent: str


@dataclass(frozen=True)
class CommitResult:
    repo: str
    layout: str
    good: str
    bad: str
    terms: tuple[str, str]  # (old, new)
    target: Target
    culprit: Culprit | None
    candidates: tuple[str, ...]  # when only skipped commits were left
    confirmed: bool
    steps: tuple[StepRecord, ...]
    bisect_log: str
    git_output: str
    commits_in_range: int
    expected_steps: int
    jobs: int = 1  # revisions judged at once (--jobs); 1: git bisect run
    rounds: int = 0  # rounds of a --jobs K search (0: git bisect run, one step a round)


class Checkout(Protocol):
    """What the confirmation needs of the tree it runs in (the bisect worktree, or nothing for builds by commit)."""

    path: Path

    def checkout(self, commit: str) -> None:
        ...


def new_bisect_id(scenario: str) -> str:
    return f"{folder_stamp()}-{re.sub(r'[^A-Za-z0-9_.-]+', '-', scenario)[:40]}-{secrets.token_hex(2)}"


def _template(layout: str, tree: Path, base: str | None) -> str:
    if layout == "sglang":
        return f"src:{tree}" + (f",base={base}" if base else "")
    return f"simsrc:{tree}"


def culprit_of(repo: Path, commit: str) -> Culprit:
    fmt = git(repo, "show", "-s", "--format=%s%x00%an%x00%aI", commit).split("\x00")
    files = tuple(f for f in git(repo, "show", "--format=", "--name-only", commit).splitlines() if f)
    parent = git(repo, "rev-parse", f"{commit}^", check=False)
    return Culprit(commit, fmt[0], fmt[1], fmt[2], files, parent)


def ordered_ends(repo: Path, good: str, bad: str, find: Find) -> tuple[str, str]:
    """(old, new) in git's terms: a regression goes good -> bad, a fix goes bad -> good."""
    regression = find is Find.REGRESSION
    old, new = (good, bad) if regression else (bad, good)
    if not is_ancestor(repo, old, new):
        hint = " (to find the commit that fixed a bug, add --find fix)" if regression else ""
        raise UserError(f"--{'good' if regression else 'bad'} {old[:12]} is not an ancestor of "
                        f"--{'bad' if regression else 'good'} {new[:12]}{hint}")
    return old, new


def bisect_commits(request: Request, repo: Path, good_rev: str, bad_rev: str, *,
                   on_endpoints: Callable[[Endpoints], None] | None = None) -> CommitResult:
    repo = repo.expanduser().absolute()
    good, bad = resolve_endpoints(repo, good_rev, bad_rev)
    old, new = ordered_ends(repo, good, bad, request.find)
    layout = layout_of(repo, bad)
    case = load_case(request.scenario, request.case)
    count = int(git(repo, "rev-list", "--count", f"{old}..{new}"))
    steps_expected = expected_steps(count)
    terms = ("good", "bad") if request.find is Find.REGRESSION else ("broken", "fixed")
    report_dir = request.report_dir
    report_dir.mkdir(parents=True, exist_ok=True)
    tag = f"bisect-{report_dir.name}"
    started = time.time()
    with BisectWorktree(repo, bad, tag=tag) as wt:
        template = _template(layout, wt.path, request.base)
        state = SearchState(
            scenario=str(request.scenario.absolute()), case=case.name, build_template=template, target=Target(),
            limits=request.limits, find=request.find, report_dir=str(report_dir.absolute()),
            store=request.store, batch=request.batch,
            experiment=experiment_key(read_text(request.scenario, "source"), case.name, f"{layout}-tree"),
            expected_steps=steps_expected, started=started, out_root=str(report_dir.absolute()),
        )
        probe = Probe(state, case)
        ends = {"good": good, "bad": bad}

        def trials_at(which: str, n: int) -> list[Trial]:
            wt.checkout(ends[which])
            progress(f"endpoint {which}: {ends[which][:12]} ({n} trial{'s' if n != 1 else ''})  "
                     f"(elapsed {time.time() - started:.0f}s)")
            return probe.trials(ends[which], template, n)

        endpoints = establish(trials_at, signature=request.signature, metric=request.metric,
                              threshold=request.threshold, limits=request.limits, catalogue=Catalogue.load())
        if on_endpoints is not None:
            on_endpoints(endpoints)
        state = replace(state, target=endpoints.target)
        record_endpoints(report_dir, state, ends, endpoints)
        state_path = report_dir / "state.json"
        write_atomic(state_path, state.to_json())  # a resumed search reads it: never half of it
        progress(f"searching {count} commits ({old[:12]}..{new[:12]}) for {endpoints.target.describe()}: "
                 f"about {steps_expected} steps")
        git(wt.path, "bisect", "start", f"--term-old={terms[0]}", f"--term-new={terms[1]}", new, old)
        output = _bisect_run(wt, state_path, tag, request.store)
        log_text = git(wt.path, "bisect", "log", check=False)
        found = _FOUND.search(output)
        ambiguous = _AMBIGUOUS.search(output)
        culprit = culprit_of(repo, found.group(1)) if found else None
        candidates = tuple(ambiguous.group(2).split()) if ambiguous else ()
        confirmed = False
        if culprit is not None:
            probe = Probe(state, case)
            confirmed = confirm_culprit(probe, wt, culprit, state, started, request.threshold)
        steps = tuple(read_steps(report_dir))
    return CommitResult(repo=str(repo), layout=layout, good=good, bad=bad, terms=terms, target=state.target,
                        culprit=culprit, candidates=candidates, confirmed=confirmed, steps=steps,
                        bisect_log=log_text, git_output=output, commits_in_range=count,
                        expected_steps=steps_expected)


def resolve_endpoints(repo: Path, good_rev: str, bad_rev: str) -> tuple[str, str]:
    """The commits of ``--good`` and ``--bad`` in the user's repository (UserError when they are not two)."""
    if not repo.is_dir():
        raise UserError(f"--repo {repo}: not a directory")
    good = resolve_commit(repo, good_rev, "--good")
    bad = resolve_commit(repo, bad_rev, "--bad")
    if good == bad:
        raise UserError(f"--good and --bad are the same commit {good[:12]}")
    return good, bad


def record_endpoints(report_dir: Path, state: SearchState, ends: dict[str, str], endpoints: Endpoints) -> None:
    for which, trials, reason in (("good", endpoints.good, endpoints.good_reason),
                                  ("bad", endpoints.bad, endpoints.bad_reason)):
        verdict = Verdict.GOOD if which == "good" else Verdict.BAD
        append_step(report_dir, StepRecord(kind="endpoint", revision=ends[which], label=f"--{which} "
                                           f"{ends[which][:12]}", verdict=verdict, term=state.term(verdict),
                                           reason=reason, trials=trials, cached=0, elapsed_s=0.0,
                                           extra={"endpoint": which}))


def _bisect_run(wt: BisectWorktree, state_path: Path, tag: str, store: str | None) -> str:
    """``git bisect run`` in the worktree, in its own process group that the guard knows; its output.

    Everything it prints goes to ``git-bisect-run.log``; the progress lines also to the terminal. The
    steps record into the search's store: its URL goes in the environment (``state.json`` has no password)."""
    env = dict(os.environ)
    if store is not None:
        env[STORE_ENV] = store
    env["SGLANG_REPRO_RUN"] = tag  # what the guard reaps if the harness dies
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH")) if p)
    log_path = state_path.parent / "git-bisect-run.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(["git", "-C", str(wt.path), "bisect", "run", *argv_of_step(state_path)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True, text=True, errors="replace")
        wt.tell_guard(f"pgid {proc.pid}")
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                log.write(line)
                log.flush()
                if line.startswith(("bisect: ", "Bisecting: ")):
                    sys.stderr.write(line)
                    sys.stderr.flush()
            proc.wait()
        except BaseException:  # Ctrl-C: the search and its servers go with the harness
            # A second signal only hurries it (issue 24): passed on to the step, whose run then SIGKILLs its
            # server at once and still writes its record; the interrupt still ends in the report.
            with Shield(on_signal=functools.partial(signal_group, proc.pid, signal.SIGTERM), reraise=False):
                end_group(proc.pid)
                proc.wait()
            raise
    return read_bytes(log_path, "log").decode("utf-8", errors="replace")


def confirm_culprit(probe: Probe, wt: Checkout, culprit: Culprit, state: SearchState, started: float,
             threshold: float) -> bool:
    """Fresh trials of the first new commit and of its parent. A signature: each judged on its own. A metric:
    the two compared with each other (Welch), which the machine's drift since the endpoints cannot fake."""
    n = state.limits.confirm_trials
    new_verdict = state.find.new_verdict
    old_verdict = Verdict.GOOD if new_verdict is Verdict.BAD else Verdict.BAD
    if not culprit.parent:
        return False
    records = []
    for commit, verdict in ((culprit.commit, new_verdict), (culprit.parent, old_verdict)):
        want = state.term(verdict)
        wt.checkout(commit)
        progress(f"confirming {commit[:12]} is {want} with {n} fresh trial{'s' if n != 1 else ''}  "
                 f"(elapsed {time.time() - started:.0f}s)")
        label = f"{commit[:12]} {git(wt.path, 'log', '-1', '--format=%s', commit)[:72]}"
        if state.target.metric:
            trials = tuple(probe.fresh_trials(commit, state.build_template, n))
            record = StepRecord(kind="confirm", revision=commit, label=label, verdict=verdict, term=want, reason="",
                                trials=trials, cached=0, elapsed_s=0.0)
        else:
            record = probe.judge(kind="confirm", revision=commit, label=label, spec=state.build_template,
                                 fresh_trials=n)
        records.append(record)
    if state.target.metric:
        records = _compare_metric(records[0], records[1], state, threshold)
    ok = True
    for record, verdict in zip(records, (new_verdict, old_verdict), strict=True):
        want = state.term(verdict)
        record = replace(record, extra={"expected": want, "held": record.term == want})
        append_step(Path(state.report_dir), record)
        progress(f"confirm {record.revision[:12]}: {record.term} ({record.reason})")
        ok = ok and record.term == want
    return ok


def _compare_metric(first_new: StepRecord, parent: StepRecord, state: SearchState,
                    threshold: float) -> list[StepRecord]:
    metric = state.target.metric
    assert metric is not None
    values = [without_stalls([v for t in r.trials if t.outcome is Outcome.PASS for v in [t.value(metric)]
                              if v is not None]) for r in (first_new, parent)]
    # Direction of the bad side, from the endpoints; "new" is the bad side for a regression, the good one for a fix.
    bad_up = sum(state.target.bad_samples) / len(state.target.bad_samples) > \
        sum(state.target.good_samples) / len(state.target.good_samples)
    new_up = bad_up if state.find is Find.REGRESSION else not bad_up
    if min(len(v) for v in values) < 2:
        why = f"fewer than 2 passing trials ({len(values[0])} and {len(values[1])})"
        return [replace(r, verdict=Verdict.SKIP, term="skip", reason=why) for r in (first_new, parent)]
    rel, p = endpoint_difference(values[1], values[0])  # from the parent to the first new commit
    held = (rel > 0) == new_up and abs(rel) >= threshold and p < state.limits.alpha
    shown = ["[" + ", ".join(f"{v:.4g}" for v in vs) + "]" for vs in values]
    reason = (f"{metric} {rel:+.1%} from the parent {shown[1]} to the first new commit {shown[0]} "
              f"(Welch p={p:.2g}; needs {'+' if new_up else '-'}{threshold:.0%} or more at p < {state.limits.alpha})")
    if held:
        return [replace(first_new, reason=reason), replace(parent, reason=reason)]
    return [replace(r, verdict=Verdict.SKIP, term="skip", reason=reason) for r in (first_new, parent)]
