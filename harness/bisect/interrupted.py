"""What an interrupted bisection had found: its report as far as it got (exit 3, as for any interrupt).

A Ctrl-C or SIGTERM ends the search (its ``git bisect run`` and step are stopped, each step's run writes
its ``interrupted`` record, the temporary clone is removed); what the search had established is on disk
by then: ``steps.jsonl`` (every endpoint and step judged so far), ``state.json`` (the target, once the
endpoints held) and ``git-bisect-run.log``. This module reads them back into the report's commit section,
so the report says which commits were judged and how, and where the search stood.
"""

from __future__ import annotations

from pathlib import Path

from harness.bisect.oracle import Find, Target
from harness.bisect.probe import SearchState
from harness.bisect.session import CommitResult
from harness.bisect.step import expected_steps, read_steps
from harness.util.bounded_read import read_bytes, read_text
from harness.util.errors import EXIT_INFRA
from harness.util.proc import commit_of, git

__all__ = ["INTERRUPTED_EXIT", "interrupted_commits", "interrupted_summary"]

INTERRUPTED_EXIT = EXIT_INFRA  # design.md: an interrupt is exit 3 (infra, timeout or interrupted), never 130


def interrupted_commits(folder: Path, repo: Path, good_rev: str, bad_rev: str, find: Find,
                        target: Target) -> CommitResult:
    """The commit search of ``folder`` as far as it got (no culprit: an interrupted search names none)."""
    repo = repo.expanduser().absolute()
    good = commit_of(repo, good_rev) or good_rev
    bad = commit_of(repo, bad_rev) or bad_rev
    old, new = (good, bad) if find is Find.REGRESSION else (bad, good)
    counted = git(repo, "rev-list", "--count", f"{old}..{new}", check=False)
    count = int(counted) if counted and counted.isdigit() else 0
    state = folder / "state.json"
    if state.is_file():  # written once the endpoints held: the target the search was after
        target = SearchState.from_json(read_text(state, "state")).target
    run_log = folder / "git-bisect-run.log"
    output = read_bytes(run_log, "log").decode("utf-8", errors="replace") if run_log.is_file() else ""
    layout = "sglang" if git(repo, "cat-file", "-t", f"{bad}:python/sglang", check=False) == "tree" else "sglang-repro"
    return CommitResult(repo=str(repo), layout=layout, good=good, bad=bad,
                        terms=("good", "bad") if find is Find.REGRESSION else ("broken", "fixed"), target=target,
                        culprit=None, candidates=(), confirmed=False, steps=tuple(read_steps(folder)),
                        bisect_log="(interrupted: the search's clone is removed; the steps above are what it judged)",
                        git_output=output, commits_in_range=count, expected_steps=expected_steps(count))


def interrupted_summary(why: str, prefix: str, commits: CommitResult | None) -> str:
    judged = len(commits.steps) if commits is not None else 0
    where = f"; {judged} endpoint(s) and step(s) judged" + (", see the steps below" if judged else "")
    return (f"{prefix}interrupted ({why}){where if commits is not None else ''}; run it again: the trials already "
            "in the store are reused")
