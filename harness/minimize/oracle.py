"""The oracle: does a candidate still fail the same way? Every try becomes a row of the table.

A candidate is materialised as a scenario file and loaded by the real loader (so it is a valid
scenario), its flags are parsed by the build's own parser (a rejected combination is "not tried",
never "passes"), and only then run. Every run is a run record in the results store under the candidate's
canonical digest (``harness.store.searches``): a configuration seen before, in this session or an
earlier one with the same build and harness version, is answered from what it gave.

Repetition rule (stated in every report): the baseline runs 3 times. If it fails the same way 3 of
3 times the failure counts as deterministic and a candidate is judged on one run. If only ``h`` of
3, a candidate is interesting as soon as one run is, and not interesting only after ``k`` runs
without it, ``k = ceil(ln 0.05 / ln(1 - h/3))`` capped at 6 (3 runs for 2/3, 6 for 1/3). A run
that could not tell (infra, timeout) is retried once, then the candidate is "could not tell".
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from harness.build import Build
from harness.launch.launcher import launcher_for
from harness.minimize.atoms import Candidate, to_mapping
from harness.minimize.defaults import ParserDefaults
from harness.minimize.observation import Observation, Target, observe
from harness.records.run_record import RunRecord
from harness.scenario import Case, ScenarioError, load_file, server_flags
from harness.scenario.model import Timeouts
from harness.scenario.overrides import SetOverride, split_secrets
from harness.store.searches import SearchRuns
from harness.util.atomic import write_atomic
from harness.util.bounded_read import read_bytes
from harness.util.str_enum import StrEnum
from harness.version import harness_version

__all__ = ["Attempt", "BudgetSpent", "Oracle", "RepetitionRule", "Runner", "Verdict", "repetition_rule"]

log = logging.getLogger(__name__)

Runner = Callable[[Case, int], RunRecord]

# Parts of a scenario that do not change what runs.
_NOT_RUN = ("name", "description", "upstream", "markers", "expect", "builds", "timeouts")


class Verdict(StrEnum):
    INTERESTING = "interesting"
    NOT_INTERESTING = "not interesting"
    NOT_TRIED = "not tried"
    UNDECIDED = "could not tell"


class BudgetSpent(Exception):
    """The search's time budget is spent; what was found so far stands."""


@dataclass(frozen=True)
class RepetitionRule:
    runs_to_reject: int
    text: str


def repetition_rule(hits: int, runs: int) -> RepetitionRule:
    if hits >= runs:
        return RepetitionRule(1, f"deterministic ({hits}/{runs} baseline runs): one run per candidate")
    p = hits / runs
    k = min(6, math.ceil(math.log(0.05) / math.log(1 - p)))
    return RepetitionRule(k, f"flaky ({hits}/{runs} baseline runs): interesting at the first run that "
                             f"reproduces, not interesting after {k} runs that do not")


@dataclass(frozen=True)
class Attempt:
    """One row of the table: what was tried, what it gave, how long it took."""

    index: int
    step: str
    change: str
    verdict: Verdict
    detail: str
    runs: int  # fresh server runs (0: answered from known runs or not tried)
    seconds: float
    reused_from: int | None  # the row whose answer was reused
    digest: str


@dataclass
class _Judged:
    verdict: Verdict
    detail: str
    runs: int
    seconds: float
    observations: list[Observation]


def _reference_code_digest() -> str:
    """The reference server's source: its version string names a revision, not the code that models it."""
    from harness.build.reference_server import source_dir

    h = hashlib.sha256()
    for path in sorted(source_dir().glob("*.py")):
        h.update(path.name.encode() + b"\0" + read_bytes(path, "source"))
    return h.hexdigest()[:16]


class Oracle:
    """Runs candidates of one case against one build and judges them against ``target``.

    ``runs`` records every run under its digest; ``use_cache`` False (plain ddmin): known runs are never
    reused, in this session or from the store."""

    def __init__(self, *, base: dict[str, Any], build: Build, defaults: ParserDefaults, runner: Runner,
                 runs: SearchRuns, use_cache: bool, jobs: int, work_dir: Path,
                 deadline: float | None) -> None:
        self.base = base
        self.build = build
        self.defaults = defaults
        self.runner = runner
        self.runs = runs
        self.use_cache = use_cache
        self.jobs = max(1, jobs)
        self.work_dir = work_dir
        self.deadline = deadline
        self.target: Target | None = None
        self.rule = RepetitionRule(1, "deterministic")
        self.timeouts: Timeouts | None = None
        self.attempts: list[Attempt] = []
        self.fresh_runs = 0
        self.run_seconds: list[float] = []
        self._first_row: dict[str, int] = {}
        self._secrets: dict[Path, tuple[SetOverride, ...]] = {}  # per candidate file: its secrets, kept out of it
        self._seen: dict[str, list[Observation]] = {}  # per digest: the store's runs, then this session's
        self._lock = threading.Lock()
        self._trial = 0
        self._code = _reference_code_digest() if build.is_reference else None

    # ------------------------------------------------------------------ identity

    def digest(self, cand: Candidate) -> str:
        """The canonical digest: what runs (flags at their defaults dropped, aliases merged) on which build."""
        data = to_mapping(self.base, cand)
        for key in _NOT_RUN:
            data.pop(key, None)
        server = data["server"]
        flags = [self.defaults.canonical(name, value) for name, value in server.pop("args").items()]
        server["args"] = sorted((f for f in flags if f is not None), key=lambda f: f[0])
        ident = {"build": [self.build.spec, self.build.version, self.build.commit], "harness": harness_version(),
                 "code": self._code}
        text = json.dumps({"run": data, "on": ident}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def scenario_file(self, cand: Candidate, *, name: str | None = None) -> Path:
        data = to_mapping(self.base, cand)
        path = self.work_dir / "candidates" / f"{name or self.digest(cand)}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        data, self._secrets[path] = split_secrets(data)  # a secret (a --set HF_TOKEN) is never saved in plain text
        write_atomic(path, yaml.safe_dump(data, sort_keys=False))
        return path

    def materialize(self, cand: Candidate) -> Case | str:
        """The candidate as a loaded, validated case; or why it is not a valid scenario."""
        path = self.scenario_file(cand)
        try:
            (case,) = load_file(path, overrides=self._secrets.get(path, ())).cases
        except ScenarioError as exc:
            return f"not a valid scenario: {exc.lines[0] if exc.lines else exc}"
        if self.timeouts is not None:
            case = replace(case, scenario=case.scenario.model_copy(update={"timeouts": self.timeouts}))
        return case

    # ------------------------------------------------------------------ running

    def _time_left(self) -> bool:
        return self.deadline is None or time.monotonic() < self.deadline

    def known(self, digest: str) -> list[Observation]:
        """What the configuration of ``digest`` gave so far: in the store (asked once), then in this session."""
        with self._lock:
            seen = self._seen.get(digest)
        if seen is None:
            stored = [observe(r) for r in self.runs.known(digest)]
            with self._lock:
                seen = self._seen.setdefault(digest, stored)
        with self._lock:
            return list(seen)

    def run_once(self, case: Case, digest: str) -> Observation:
        """One fresh run of ``case``, recorded in the store under ``digest``."""
        with self._lock:
            trial = self._trial
            self._trial += 1
        record = self.runner(case, trial)
        if self.use_cache:
            self.known(digest)  # the store's runs come first
        self.runs.record(digest, record)
        obs = observe(record)
        with self._lock:
            self._seen.setdefault(digest, []).append(obs)
            self.fresh_runs += 1
            self.run_seconds.append(obs.duration_s)
        return obs

    def _judge(self, cand: Candidate, digest: str, case: Case) -> _Judged:
        assert self.target is not None
        start = time.monotonic()
        seen = self.known(digest) if self.use_cache else []
        if any(self.target.matches(o) for o in seen):
            return _Judged(Verdict.INTERESTING, self.target.describe(), 0, 0.0, seen)
        decided = [o for o in seen if not o.undecided]
        undecided = 0
        runs = 0
        while len(decided) < self.rule.runs_to_reject:
            if not self._time_left():
                raise BudgetSpent
            obs = self.run_once(case, digest)
            runs += 1
            seen.append(obs)
            if self.target.matches(obs):
                return _Judged(Verdict.INTERESTING, self.target.describe(), runs, time.monotonic() - start, seen)
            if obs.undecided:
                undecided += 1
                if undecided >= 2:
                    return _Judged(Verdict.UNDECIDED, obs.describe(), runs, time.monotonic() - start, seen)
                continue
            decided.append(obs)
        detail = decided[-1].describe() if decided else "no decided run"
        return _Judged(Verdict.NOT_INTERESTING, detail, runs, time.monotonic() - start, seen)

    def _record(self, step: str, change: str, digest: str, judged: _Judged) -> Attempt:
        with self._lock:
            reused = self._first_row.get(digest) if judged.runs == 0 and judged.verdict != Verdict.NOT_TRIED else None
            row = Attempt(len(self.attempts) + 1, step, change, judged.verdict, judged.detail, judged.runs,
                          round(judged.seconds, 2), reused, digest)
            self.attempts.append(row)
            self._first_row.setdefault(digest, row.index)
        log.info("#%d %s: %s -> %s (%s)", row.index, step, change, row.verdict, row.detail)
        return row

    def first_interesting(self, step: str, tries: Sequence[tuple[str, Candidate]]) -> int | None:
        """Judge ``tries`` in order (``jobs`` at a time); the index of the first interesting one, or None."""
        loaded = [self.materialize(c) for _, c in tries]
        cases = {i: c for i, c in enumerate(loaded) if not isinstance(c, str)}
        digests = [self.digest(c) for _, c in tries]
        verdicts = self._parse(loaded)
        for wave_start in range(0, len(tries), self.jobs):
            wave = range(wave_start, min(len(tries), wave_start + self.jobs))
            results: dict[int, _Judged] = {}
            todo = []
            for i in wave:
                if verdicts[i] is not None:
                    results[i] = _Judged(Verdict.NOT_TRIED, str(verdicts[i]), 0, 0.0, [])
                else:
                    todo.append(i)
            spent = False
            if todo:
                unique: dict[str, int] = {}
                for i in todo:
                    unique.setdefault(digests[i] if self.use_cache else f"{digests[i]}#{i}", i)
                spent = self._run_wave(list(unique.values()), tries, digests, cases, results)
                for i in todo:
                    if i not in results:
                        twin = next((j for j in unique.values() if digests[j] == digests[i] and j in results), None)
                        if twin is not None:
                            done = results[twin]
                            results[i] = _Judged(done.verdict, done.detail, 0, 0.0, done.observations)
            for i in wave:
                if i in results:
                    self._record(step, tries[i][0], digests[i], results[i])
            if spent:
                raise BudgetSpent
            hit = next((i for i in wave if results[i].verdict == Verdict.INTERESTING), None)
            if hit is not None:
                return hit
        return None

    def _run_wave(self, indices: list[int], tries: Sequence[tuple[str, Candidate]], digests: list[str],
                  cases: dict[int, Case], results: dict[int, _Judged]) -> bool:
        """Judge ``indices`` into ``results``, ``jobs`` at a time; True when the budget ran out."""
        if self.jobs == 1:
            # In the calling thread: Ctrl-C or SIGTERM ends the run now, with its record written.
            for i in indices:
                try:
                    results[i] = self._judge(tries[i][1], digests[i], cases[i])
                except BudgetSpent:
                    return True
            return False
        spent = False
        with ThreadPoolExecutor(max_workers=min(self.jobs, len(indices))) as pool:
            futures = {i: pool.submit(self._judge, tries[i][1], digests[i], cases[i]) for i in indices}
            for i, fut in futures.items():
                try:
                    results[i] = fut.result()
                except BudgetSpent:
                    spent = True
        return spent

    def _parse(self, loaded: Sequence[Case | str]) -> list[str | None]:
        """Why each candidate cannot be tried (invalid scenario, the build's parser rejects it), or None."""
        out: list[str | None] = [c if isinstance(c, str) else None for c in loaded]
        valid = [(i, c) for i, c in enumerate(loaded) if not isinstance(c, str)]
        if valid:
            argvs = [server_flags(c.scenario) for _, c in valid]
            for (i, _), check in zip(valid, launcher_for(self.build).check_flags(argvs), strict=True):
                if not check.ok:
                    out[i] = f"{self.build.spec}'s parser rejects it: {check.message}"
        return out

    def observe_many(self, case: Case, count: int, digest: str) -> list[Observation]:
        """``count`` fresh runs of one case (``jobs`` at a time), each recorded under ``digest``."""
        if self.jobs == 1:
            found = [self.run_once(case, digest) for _ in range(count)]
        else:
            with ThreadPoolExecutor(max_workers=min(self.jobs, count)) as pool:
                found = list(pool.map(lambda _: self.run_once(case, digest), range(count)))
        # The rule of every run: one that could not tell (a port taken by another program, a timeout) is retried once.
        return [self.run_once(case, digest) if obs.undecided else obs for obs in found]

    def record_runs(self, step: str, change: str, digest: str, found: Sequence[Observation],
                    verdict: Verdict, detail: str, seconds: float, runs: int) -> Attempt:
        return self._record(step, change, digest, _Judged(verdict, detail, runs, seconds, list(found)))
