"""``python -P -m harness.bisect.step STATE``: the script ``git bisect run`` calls at each revision.

Exit codes as ``git bisect run`` reads them: 0 old (good; broken for ``--find fix``), 1 new,
125 skip. A failure of the harness itself exits 128, which makes ``git bisect run`` stop: a broken
oracle must not steer the search. Run with ``-P`` so the checkout under test (which may be a copy of
this very project) never shadows the harness that judges it.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from harness.bisect.probe import Probe, SearchState, StepRecord, load_case, progress
from harness.store.url import STORE_ENV
from harness.util.bounded_read import read_text
from harness.util.errors import EXIT_BISECT_ABORT
from harness.util.proc import git
from harness.util.progress import fmt_duration

__all__ = ["EXIT_ABORT", "STEPS_FILE", "main", "read_steps"]

STEPS_FILE = "steps.jsonl"
EXIT_ABORT = EXIT_BISECT_ABORT


def read_steps(report_dir: Path) -> list[StepRecord]:
    path = report_dir / STEPS_FILE
    if not path.is_file():
        return []
    return [StepRecord.from_dict(json.loads(line)) for line in read_text(path, "state").splitlines() if line.strip()]


def append_step(report_dir: Path, record: StepRecord) -> None:
    with (report_dir / STEPS_FILE).open("a") as f:
        f.write(json.dumps(record.to_dict()) + "\n")


def describe_commit(tree: Path, commit: str) -> str:
    return f"{commit[:12]} {git(tree, 'log', '-1', '--format=%s', commit)[:72]}"


def elapsed(state: SearchState) -> str:
    return f"{time.time() - state.started:.0f}s"


def read_state(path: Path) -> SearchState:
    """The search state; its store is the one the search named (``$SGLANG_REPRO_STORE``, which the search
    sets for ``git bisect run``: ``state.json`` never holds a password)."""
    state = SearchState.from_json(read_text(path, "state"))
    if state.store is not None:
        state = replace(state, store=os.environ.get(STORE_ENV) or state.store)
    return state


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        sys.stderr.write("usage: python -P -m harness.bisect.step STATE.json\n")
        return EXIT_ABORT
    try:
        state = read_state(Path(args[0]))
        report_dir = Path(state.report_dir)
        tree = Path.cwd()
        commit = git(tree, "rev-parse", "HEAD")
        label = describe_commit(tree, commit)
        k = sum(1 for s in read_steps(report_dir) if s.kind == "step") + 1
        progress(f"{step_of(k, state.expected_steps)}: testing {label}  (elapsed {elapsed(state)})")
        probe = Probe(state, load_case(Path(state.scenario), state.case))
        record = probe.judge(kind="step", revision=commit, label=label, spec=state.build_template, index=k)
        append_step(report_dir, record)
        launched = record.launched
        left = time_left(time.time() - state.started, k, state.expected_steps)
        progress(f"{step_of(k, state.expected_steps)}: {commit[:12]} is {record.term} ({record.reason}; "
                 f"{len(record.trials)} trial(s): {launched} new server(s), {record.cached} cached)  "
                 f"(elapsed {elapsed(state)}{left})")
        return state.exit_code(record.verdict)
    except KeyboardInterrupt:
        return EXIT_ABORT
    except Exception as exc:  # any failure of the oracle itself must stop the search, with its cause
        sys.stderr.write(f"bisect: the oracle failed, stopping the search: {type(exc).__name__}: {exc}\n")
        return EXIT_ABORT


def expected_steps(count: int) -> int:
    """About ceil(log2 N) decisions for N revisions between the endpoints."""
    return max(1, math.ceil(math.log2(max(count, 2))))


def time_left(elapsed_s: float, steps_done: int, expected: int) -> str:
    """``, ~3:20 left``: the mean time of the probes so far (both endpoints and ``steps_done`` steps) times the
    steps still expected and the culprit's confirmation; rough, as the estimate of steps is (skips add steps)."""
    probes_left = max(expected - steps_done, 0) + 1
    return f", ~{fmt_duration(elapsed_s / (2 + steps_done) * probes_left)} left"


def step_of(k: int, expected: int) -> str:
    """``step 3 of ~6``; past the estimate (skipped commits add steps) it says so rather than "step 7 of ~6"."""
    return f"step {k} of ~{expected}" if k <= expected else f"step {k} (past the ~{expected} estimated: skips add steps)"


if __name__ == "__main__":
    sys.exit(main())
