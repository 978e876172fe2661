"""One minimization: baseline, then shrink the workload, the flags, their values and the prompt while
the same failure reproduces, then confirm the result 3 of 3 times before writing it.

Two orders. The default is cheap-first, reusing known runs: the workload shrinks first (every later run is
then cheaper), flags go first all at once and then the likely-irrelevant ones in bulk before ddmin
(atoms ordered likely-first), lengths are found by galloping up from 1, and no configuration runs
twice. ``plain=True`` is the benchmark's peer: textbook ddmin over the flags in the scenario's order on
the full workload, bisection for lengths, no known run reused. Every run is recorded in the results store
(``options.store``) in a batch of kind ``minimize`` labelled with the session.
"""

from __future__ import annotations

import functools
import logging
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.build import Build
from harness.launch.launcher import launcher_for
from harness.minimize.atoms import (
    Atom,
    Candidate,
    atom_class,
    base_mapping,
    initial_candidate,
)
from harness.minimize.ddmin import DDState, ddmin, smallest_failing
from harness.minimize.defaults import ParserDefaults, read_defaults
from harness.minimize.observation import Observation, Target
from harness.minimize.oracle import (
    Attempt,
    BudgetSpent,
    Oracle,
    Runner,
    Verdict,
    repetition_rule,
)
from harness.minimize.output import minimal_mapping, write_minimal
from harness.pipeline import RunOptions, execute_run
from harness.records.outcome import Outcome
from harness.records.run_record import RunRecord
from harness.scenario import Case, ScenarioError, load_file
from harness.scenario.model import Timeouts
from harness.store.searches import SearchRuns
from harness.store.store import new_batch
from harness.util.atomic import replace_with
from harness.util.clock import folder_stamp
from harness.util.errors import EXIT_FAIL, EXIT_INFRA, EXIT_OK, EXIT_USAGE
from harness.util.paths import reports_root

__all__ = ["MinimizeOptions", "MinimizeResult", "minimize"]

log = logging.getLogger(__name__)

BASELINE_RUNS = 3
CONFIRM_RUNS = 3


@dataclass(frozen=True)
class MinimizeOptions:
    budget_s: float | None = None
    jobs: int = 1
    plain: bool = False
    store: str | None = None  # the results store: every run recorded, known ones reused; None: this session's only
    out_root: Path | None = None
    output: Path | None = None  # where the minimal YAML goes (default: in the session folder)
    runner: Runner | None = None  # how one candidate runs (default: execute_run on the build); a seam for tests
    progress: Callable[[int, RunRecord], None] | None = None  # after each server run: how many so far, the record


@dataclass(frozen=True)
class MinimizeResult:
    status: str  # written | no-failure | not-reproducible | infra | bad-input | interrupted
    exit_code: int
    message: str
    session_dir: Path
    target: Target | None = None
    rule: str = ""
    original: Candidate | None = None
    minimal: Candidate | None = None
    minimal_mapping: dict[str, Any] | None = None
    output: Path | None = None
    attempts: tuple[Attempt, ...] = ()
    untried: tuple[str, ...] = ()
    baseline: tuple[Observation, ...] = ()
    confirmations: tuple[Observation, ...] = ()
    fresh_runs: int = 0
    wall_s: float = 0.0
    slips: tuple[str, ...] = field(default=())


def _session_dir(root: Path | None, case: Case) -> Path:
    stamp = folder_stamp()
    base = (root or reports_root()) / "minimize" / f"{stamp}-{case.scenario.name}"[:80]
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    from harness.util.output_path import make_folder

    return make_folder(path, "the minimize folder", exist_ok=False)


def _labels(atoms: list[Atom] | tuple[Atom, ...]) -> str:
    return " ".join(a.label for a in atoms) or "(none)"


class _Search:
    def __init__(self, case: Case, build: Build, defaults: ParserDefaults, options: MinimizeOptions,
                 session: Path) -> None:
        self.case = case
        self.build = build
        self.defaults = defaults
        self.opts = options
        self.session = session
        self.started = time.monotonic()
        self.base = base_mapping(case.scenario, case.file)
        self.original = initial_candidate(case.scenario)
        self.current = self.original
        self.accepted: list[Candidate] = [self.original]
        deadline = None if options.budget_s is None else self.started + options.budget_s
        runs = SearchRuns(options.store, new_batch("minimize", session.name))
        self.runs_done, self._count_lock = 0, threading.Lock()
        self.oracle = Oracle(base=self.base, build=build, defaults=defaults, runner=self._counted,
                             runs=runs, use_cache=not options.plain,
                             jobs=options.jobs, work_dir=session, deadline=deadline)
        self.untried: list[str] = []
        self.prompt_lengths = case.scenario.workload.prompt.lengths()

    def _counted(self, case: Case, trial: int) -> RunRecord:
        """One server run, counted and shown (``--jobs N`` runs them from several threads)."""
        record = (self.opts.runner or self._run)(case, trial)
        with self._count_lock:
            self.runs_done += 1
            if self.opts.progress is not None:
                self.opts.progress(self.runs_done, record)
        return record

    def _run(self, case: Case, trial: int) -> RunRecord:
        return execute_run(case, self.build, trial=trial, options=RunOptions(out_root=self.session, progress=False))

    # ------------------------------------------------------------------ helpers

    def _try(self, step: str, tries: list[tuple[str, Candidate]]) -> bool:
        hit = self.oracle.first_interesting(step, tries)
        if hit is None:
            return False
        self.current = tries[hit][1]
        self.accepted.append(self.current)
        return True

    def _shrink_number(self, step: str, field_name: str, value: int, *, low: int = 1) -> None:
        def fails(v: int) -> bool:
            cand = self.current.with_shape(**{field_name: v})
            now = getattr(self.current.shape, field_name)
            return self._try(step, [(f"{field_name} {value if now is None else now}->{v}", cand)])

        # The current candidate only ever moves to a value that failed: it ends at the smallest one.
        smallest_failing(low, value, fails, gallop=not self.opts.plain)

    # ------------------------------------------------------------------ steps

    def workload(self) -> None:
        shape = self.current.shape
        if not self.opts.plain and (shape.requests, shape.concurrency, shape.warmup) != (1, 1, 0):
            one = self.current.with_shape(requests=1, concurrency=1, warmup=0)
            if self._try("workload", [(one.shape.describe(shape), one)]):
                shape = self.current.shape
        if shape.warmup:
            self._try("workload", [("warmup ->0", self.current.with_shape(warmup=0))])
        if self.current.shape.requests > 1:
            self._shrink_number("workload", "requests", self.current.shape.requests)
        if self.current.shape.concurrency > 1:
            self._shrink_number("workload", "concurrency", self.current.shape.concurrency)
        if self.current.shape.max_new_tokens > 1:
            self._shrink_number("workload", "max_new_tokens", self.current.shape.max_new_tokens)

    def flags(self) -> None:
        atoms = list(self.current.atoms)
        if not atoms:
            return
        if not self.opts.plain:
            if self._try("flags", [(f"drop all: {_labels(atoms)}", self.current.keeping([]))]):
                return
            likely = [a for a in atoms if atom_class(a) == "likely"]
            if likely and len(likely) < len(atoms):
                self._try("flags", [(f"drop likely-irrelevant: {_labels(likely)}", self.current.without(likely))])
            atoms = sorted(self.current.atoms, key=lambda a: atom_class(a) != "likely")
        self._ddmin = DDState(items=atoms)

        def first_interesting(chunks: Any) -> int | None:
            tries = []
            for chunk in chunks:
                dropped = [a for a in self.current.atoms if a not in chunk]
                change = f"drop {_labels(dropped)}" if len(dropped) <= len(chunk) else f"keep only {_labels(chunk)}"
                tries.append((change, self.current.keeping(chunk)))
            return self.oracle.first_interesting("flags (ddmin)", tries) if tries else None

        def accept_hook(chunks: Any) -> int | None:
            hit = first_interesting(chunks)
            if hit is not None:
                self.current = self.current.keeping(chunks[hit])
                self.accepted.append(self.current)
            return hit

        ddmin(self._ddmin, accept_hook, textbook=self.opts.plain)

    def values(self) -> None:
        """Integer flags toward the build's own default: the value closest to it that still fails."""
        for atom in list(self.current.atoms):
            if atom.kind != "flag" or isinstance(atom.value, bool) or not isinstance(atom.value, int):
                continue
            default = self.defaults.numeric_default(atom.name)
            if default is not None and float(default).is_integer() and atom.value != int(default):
                self._shrink_value(atom, int(default))

    def _shrink_value(self, atom: Atom, default: int) -> None:
        sign = 1 if atom.value > default else -1
        held = [atom]  # the atom as the current candidate has it

        def fails(dist: int) -> bool:
            value = default + sign * dist
            cand = self.current.with_value(held[-1], value)
            if self._try("values", [(f"--{atom.name} {held[-1].value}->{value} (default {default})", cand)]):
                held.append(replace(held[-1], value=value))
                return True
            return False

        smallest_failing(1, abs(atom.value - default), fails, gallop=not self.opts.plain)

    def prompt(self) -> None:
        lengths = sorted(set(self.prompt_lengths), reverse=True)
        if len(lengths) > 1:
            single = None
            for n in lengths[:4]:
                if self._try("prompt", [(f"tokens {self.prompt_lengths[:6]}->{n}", self.current.with_shape(tokens=n))]):
                    single = n
                    break
            if single is None:
                self.untried.append("prompt: no single prompt length of the scenario reproduces; lengths left as given")
                return
        top = self.current.shape.tokens or lengths[0]
        if top > 1:
            self._shrink_number("prompt", "tokens", top)

    # ------------------------------------------------------------------ the whole

    def steps(self) -> list[tuple[str, Callable[[], None]]]:
        if self.opts.plain:
            return [("flags", self.flags), ("values", self.values), ("workload", self.workload),
                    ("prompt", self.prompt)]
        return [("workload", self.workload), ("flags", self.flags), ("values", self.values), ("prompt", self.prompt)]

    def search(self) -> None:
        steps = self.steps()
        for i, (name, step) in enumerate(steps):
            try:
                step()
            except BudgetSpent:
                self.untried.append(self._interrupted(name))
                self.untried.extend(f"{later}: not started (budget spent)" for later, _ in steps[i + 1:])
                return

    def _interrupted(self, name: str) -> str:
        state = getattr(self, "_ddmin", None)
        if name == "flags" and state is not None and not state.done:
            return (f"flags: ddmin stopped at granularity {state.n} over {len(state.items)} atoms "
                    f"({_labels(state.items)}): not shown 1-minimal")
        return f"{name}: stopped part-way (budget spent); what it had found so far is kept"


def _cap_timeouts(original: Timeouts, baseline: list[Observation], target: Target) -> Timeouts | None:
    """Tighter bounds for candidates: a candidate that hangs should cost a few baseline runs, not hours."""
    if target.outcome is Outcome.TIMEOUT:
        return None
    longest = max((o.duration_s for o in baseline), default=60.0)
    return Timeouts(startup_s=min(original.startup_s, max(120.0, 10 * longest)),
                    request_s=min(original.request_s, max(60.0, 10 * longest)),
                    scenario_s=min(original.scenario_s, max(300.0, 20 * longest)))


def minimize(case: Case, build: Build, options: MinimizeOptions | None = None) -> MinimizeResult:
    """Minimize ``case`` on ``build`` (already resolved). Never raises for a failing product.

    Interrupted (SIGINT, SIGTERM) during a run, it returns what it had tried so far as status
    ``interrupted`` (exit 3, as for any interrupt), so the report is still written.
    """
    from harness.pipeline import RunInterrupted

    partial: dict[str, Callable[..., MinimizeResult]] = {}
    try:
        return _minimize(case, build, options, partial)
    except RunInterrupted as exc:
        if "result" not in partial:
            raise
        return partial["result"]("interrupted", 3, f"interrupted during a run ({exc.record.artifacts}); what was "
                                 "tried until then is below, nothing was confirmed")


def _minimize(case: Case, build: Build, options: MinimizeOptions | None,
              partial: dict[str, Callable[..., MinimizeResult]]) -> MinimizeResult:
    opts = options or MinimizeOptions()
    case = launcher_for(build).case_for(case)  # the reference server applies the scenario's `reference:`
    session = _session_dir(opts.out_root, case)
    defaults = read_defaults(build)
    s = _Search(case, build, defaults, opts, session)
    oracle = s.oracle

    def result(status: str, code: int, message: str, **extra: Any) -> MinimizeResult:
        return MinimizeResult(status=status, exit_code=code, message=message, session_dir=session,
                              target=oracle.target, rule=oracle.rule.text, original=s.original,
                              attempts=tuple(oracle.attempts), untried=tuple(s.untried),
                              fresh_runs=oracle.fresh_runs, wall_s=round(time.monotonic() - s.started, 2),
                              slips=tuple(sorted({a.detail for a in oracle.attempts
                                                  if a.verdict == Verdict.NOT_INTERESTING and a.detail != Outcome.PASS.value})),
                              **extra)

    partial["result"] = result
    # Baseline: the case as given, BASELINE_RUNS times.
    loaded = oracle.materialize(s.original)
    if isinstance(loaded, str):
        return result("bad-input", EXIT_USAGE, f"the case does not load as a scenario: {loaded}")
    rejected = oracle._parse([loaded])[0]
    if rejected:
        return result("bad-input", EXIT_USAGE, f"the case's own flags: {rejected}")
    digest = oracle.digest(s.original)
    t0, runs_before = time.monotonic(), oracle.fresh_runs
    base = oracle.observe_many(loaded, BASELINE_RUNS, digest)
    runs = oracle.fresh_runs - runs_before
    failures = [o for o in base if o.failed]
    if not failures:
        undecided = [o for o in base if o.undecided]
        oracle.record_runs("baseline", "the case as given", digest, base, Verdict.NOT_INTERESTING,
                           "; ".join(sorted({o.describe() for o in base})), time.monotonic() - t0, runs)
        if undecided:
            return result("infra", EXIT_INFRA, f"the case could not be run: {undecided[0].describe()}", baseline=tuple(base))
        return result("no-failure", EXIT_FAIL, f"the case does not fail on {build.spec}: {BASELINE_RUNS} of "
                      f"{BASELINE_RUNS} runs passed; nothing to minimize", baseline=tuple(base))
    keys = [Target.of(o) for o in failures]
    oracle.target = max(keys, key=keys.count)  # the most frequent failure; ties: the first seen
    hits = sum(1 for o in base if oracle.target.matches(o))
    oracle.rule = repetition_rule(hits, BASELINE_RUNS)
    oracle.record_runs("baseline", "the case as given", digest, base, Verdict.INTERESTING,
                       f"{oracle.target.describe()} in {hits}/{BASELINE_RUNS}", time.monotonic() - t0, runs)
    oracle.timeouts = _cap_timeouts(case.scenario.timeouts, base, oracle.target)

    s.search()
    return _confirm(s, case, result, tuple(base))


def _confirm(s: _Search, case: Case, result: Callable[..., MinimizeResult],
             base: tuple[Observation, ...]) -> MinimizeResult:
    """Write the most reduced candidate that reproduces CONFIRM_RUNS of CONFIRM_RUNS times; walk back if needed."""
    oracle = s.oracle
    assert oracle.target is not None
    tried: set[str] = set()
    undecided = 0
    for cand in [s.current, *reversed(s.accepted)]:
        digest = oracle.digest(cand)
        if digest in tried:
            continue
        tried.add(digest)
        mapping = minimal_mapping(s.base, cand, case=case, build=s.build, target=oracle.target,
                                  runs=CONFIRM_RUNS)
        path = s.session / "minimal.yaml"
        secrets = write_minimal(path, mapping, case=case, build=s.build, target=oracle.target)
        try:
            (written,) = load_file(path, overrides=secrets).cases
        except ScenarioError as exc:  # a bug of the minimizer, said plainly
            return result("infra", EXIT_INFRA, f"the minimal scenario does not validate: {exc.lines[0]}")
        t0, runs_before = time.monotonic(), oracle.fresh_runs
        found = oracle.observe_many(written, CONFIRM_RUNS, digest)
        hits = sum(1 for o in found if oracle.target.matches(o))
        ok = hits == CONFIRM_RUNS
        oracle.record_runs("confirm", f"{path.name} ({_labels(cand.atoms)}; {cand.shape.describe()})", digest,
                           found, Verdict.INTERESTING if ok else Verdict.NOT_INTERESTING,
                           f"{oracle.target.describe()}: {hits}/{CONFIRM_RUNS} reproduce"
                           + ("" if ok else f"; also {found[-1].describe()}"),
                           time.monotonic() - t0, oracle.fresh_runs - runs_before)
        undecided += sum(1 for o in found if o.undecided)
        if ok:
            output = path
            if s.opts.output is not None:
                s.opts.output.parent.mkdir(parents=True, exist_ok=True)
                replace_with(s.opts.output, functools.partial(shutil.copyfile, path))  # never through a link/device
                output = s.opts.output
            return result("written", EXIT_OK, f"minimal case written to {output}", minimal=cand, minimal_mapping=mapping,
                          output=output, baseline=base, confirmations=tuple(found))
        path.unlink()
    if undecided:
        return result("infra", EXIT_INFRA, "no reduction could be confirmed: runs could not tell (infra/timeout)", baseline=base)
    return result("not-reproducible", EXIT_FAIL, f"the failure does not reproduce {CONFIRM_RUNS} of {CONFIRM_RUNS} times, "
                  "not even as given; nothing written", baseline=base)
