"""One revision under test: its build, its trials (known or run), the oracle's decision, the step record.

The search state (``SearchState``) is written once as JSON so that the step that ``git bisect run``
calls, a separate process, judges every revision exactly as the harness judged the endpoints, and
records its runs in the same store.

Known trials: the unit kept is the trial, not the verdict: a later search for another signature, the
other direction (``--find fix``) or a metric against other endpoint samples re-decides from the same
trials and adds only what it still needs. Each trial is a run record in the results store
(``harness.store.searches``), found again by the revision (commit id or release), a digest of the
experiment (scenario file text, case name, build template) and the harness version.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.bisect.oracle import (
    Decision,
    Find,
    Limits,
    Target,
    Trial,
    Verdict,
    judge,
    trial_from_record,
)
from harness.build import Builds
from harness.records.run_record import RunRecord
from harness.scenario import Case, load_file, select_cases
from harness.server.pool import ServerPool
from harness.store.searches import SearchRuns, search_key
from harness.store.store import Batch
from harness.store.url import redact_url
from harness.util.errors import EXIT_BISECT_SKIP, EXIT_FAIL, EXIT_OK

__all__ = ["Probe", "SearchState", "StepRecord", "experiment_key", "load_case", "progress"]


def experiment_key(scenario_text: str, case_name: str, build_template: str) -> str:
    text = json.dumps([scenario_text, case_name, build_template])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class SearchState:
    """Everything a step needs, as plain data (written to ``state.json`` in the report folder)."""

    scenario: str
    case: str
    build_template: str  # "{tree}" or "{version}" is filled per revision
    target: Target
    limits: Limits
    find: Find
    report_dir: str
    store: str | None  # where the trials are recorded and known trials found; None: neither (--no-cache)
    batch: Batch  # the search's batch in the store
    experiment: str
    expected_steps: int
    started: float  # time.time() of the bisection's start
    out_root: str

    def to_json(self) -> str:
        """The state as JSON; the store's password is left out (the step reads the URL from $SGLANG_REPRO_STORE)."""
        data = asdict(self)
        data["store"] = None if self.store is None else redact_url(self.store)
        return json.dumps(data, indent=2)

    @classmethod
    def from_json(cls, text: str) -> SearchState:
        data = json.loads(text)
        target = data.pop("target")
        target["good_samples"] = tuple(target["good_samples"])
        target["bad_samples"] = tuple(target["bad_samples"])
        return cls(target=Target(**target), limits=Limits(**data.pop("limits")), batch=Batch(**data.pop("batch")),
                   find=Find(data.pop("find")), **data)

    def exit_code(self, verdict: Verdict) -> int:
        """``git bisect run``'s code: 0 old, 1 new, 125 skip. For a fix, old is the broken side."""
        if verdict is Verdict.SKIP:
            return EXIT_BISECT_SKIP
        return EXIT_FAIL if verdict is self.find.new_verdict else EXIT_OK

    def term(self, verdict: Verdict) -> str:
        if verdict is Verdict.SKIP:
            return "skip"
        if self.find is Find.REGRESSION:
            return verdict.value
        return "broken" if verdict is Verdict.BAD else "fixed"


@dataclass(frozen=True)
class StepRecord:
    kind: str  # endpoint | step | confirm | release
    revision: str
    label: str  # a short commit id and subject, or a release
    verdict: Verdict
    term: str
    reason: str
    trials: tuple[Trial, ...]
    cached: int  # how many of the trials were known (run records in the store)
    elapsed_s: float
    index: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def launched(self) -> int:
        """Servers started for this step: trials of one revision share a server until one does not pass;
        cached trials and infra ones (nothing started) do not count."""
        new = [t for t in self.trials[self.cached:] if t.launched]
        return len({t.server or str(i) for i, t in enumerate(new)})

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "kind": self.kind, "revision": self.revision, "label": self.label,
                "verdict": self.verdict.value, "term": self.term, "reason": self.reason, "cached": self.cached,
                "launched": self.launched, "elapsed_s": round(self.elapsed_s, 3),
                "trials": [t.to_dict() for t in self.trials], **dict(self.extra)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StepRecord:
        known = {"index", "kind", "revision", "label", "verdict", "term", "reason", "cached", "launched",
                 "elapsed_s", "trials"}
        return cls(kind=d["kind"], revision=d["revision"], label=d["label"], verdict=Verdict(d["verdict"]),
                   term=d["term"], reason=d["reason"], trials=tuple(Trial.from_dict(t) for t in d["trials"]),
                   cached=int(d["cached"]), elapsed_s=float(d["elapsed_s"]), index=int(d.get("index", 0)),
                   extra={k: v for k, v in d.items() if k not in known})


def load_case(scenario: Path, name: str | None) -> Case:
    """Exactly one case of the scenario (a bisection searches one experiment)."""
    from harness.scenario.overrides import secret_sets_from_env
    from harness.util.errors import UserError

    # a search run with secret --set overrides reads a copy without them; they come in the environment
    cases = select_cases(load_file(scenario, overrides=secret_sets_from_env()), name)
    if len(cases) != 1:
        names = ", ".join(c.name for c in cases)
        raise UserError(f"{scenario}: --case must pick exactly one case, it picks {len(cases)}: {names}")
    return cases[0]


def progress(text: str) -> None:
    """One line on the terminal (stderr: ``git bisect run`` keeps its own stdout)."""
    sys.stderr.write(f"bisect: {text}\n")
    sys.stderr.flush()


class Probe:
    """Judges revisions of one experiment: known trials first, then runs until the oracle decides."""

    def __init__(self, state: SearchState, case: Case, *, gpus: tuple[int, ...] | None = None) -> None:
        self.state = state
        self.case = case
        self.runs = SearchRuns(state.store, state.batch)
        self.gpus = gpus  # the GPUs a scheduler gave the job this probe runs in; None: lease from this machine's

    def _known(self, revision: str) -> list[Trial]:
        return [trial_from_record(r) for r in self.runs.known(search_key(revision, self.state.experiment))]

    def _execute(self, spec: str, index: int, pool: ServerPool, builds: Builds) -> RunRecord:
        from harness.pipeline import RunOptions, execute_run, resolve_for

        return execute_run(self.case, resolve_for(self.case, spec, builds), role=None, trial=index, pool=pool,
                           options=RunOptions(out_root=Path(self.state.out_root), progress=False, gpus=self.gpus))

    def _run_trial(self, revision: str, spec: str, index: int, pool: ServerPool, builds: Builds) -> Trial:
        """One new trial, recorded in the store under the revision and the experiment."""
        record = self._execute(spec, index, pool, builds)
        self.runs.record(search_key(revision, self.state.experiment), record)
        return trial_from_record(record)

    def _pool(self) -> ServerPool:
        # One revision's trials share a server (the scenario's server.share_between_trials); the pool is
        # closed before the next revision is checked out into the same worktree.
        return ServerPool(Path(self.state.out_root))

    # Each of the three below resolves the build once for all its trials (and not at all when the cache
    # answers): the spec names the worktree, whose checkout moves between calls, so no resolution outlives one.

    def judge(self, *, kind: str, revision: str, label: str, spec: str, target: Target | None = None,
              fresh_trials: int = 0, index: int = 0) -> StepRecord:
        """Decide one revision. ``fresh_trials`` > 0 (confirmation): ignore known trials, run that many at least."""
        started = time.monotonic()
        target = target or self.state.target
        limits = self.state.limits
        known = [] if fresh_trials else self._known(revision)
        if fresh_trials:
            limits = replace(limits, max_trials=max(limits.max_trials, fresh_trials),
                             max_inconclusive=max(limits.max_inconclusive, fresh_trials))
        builds = Builds()
        with self._pool() as pool:
            def run(i: int) -> Trial:
                return self._run_trial(revision, spec, i, pool, builds)

            decision: Decision = judge(run, target, limits, known=known, min_trials=max(1, fresh_trials))
        return StepRecord(kind=kind, revision=revision, label=label, verdict=decision.verdict,
                          term=self.state.term(decision.verdict), reason=decision.reason, trials=decision.trials,
                          cached=len(known), elapsed_s=time.monotonic() - started, index=index)

    def fresh_trials(self, revision: str, spec: str, n: int) -> list[Trial]:
        """``n`` new trials on one server (recorded in the store too)."""
        builds = Builds()
        with self._pool() as pool:
            return [self._run_trial(revision, spec, i, pool, builds) for i in range(n)]

    def trials(self, revision: str, spec: str, n: int) -> list[Trial]:
        """The first ``n`` trials of a revision: known ones, then new runs."""
        known, builds = self._known(revision)[:n], Builds()
        with self._pool() as pool:
            known += [self._run_trial(revision, spec, i, pool, builds) for i in range(len(known), n)]
        return known
