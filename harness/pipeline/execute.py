"""The run itself: the phases in order, each bounded, ending in a verdict and a written record.

A run interrupted by SIGINT or SIGTERM still tears its server down and writes its record (outcome
``interrupted``), then raises :class:`RunInterrupted` so the caller stops too.
"""

from __future__ import annotations

import secrets
import time

from harness.build import Build, BuildFailure, Builds
from harness.pipeline.judge import judge, phase_reached
from harness.pipeline.record import record, version_label
from harness.pipeline.resolve import resolve, resolve_for
from harness.pipeline.serve import serve
from harness.pipeline.stages import Resolved, RunContext, RunInterrupted, RunOptions, RunPaths, Trail, Unresolved
from harness.records.artifacts import new_run_dir
from harness.records.outcome import Outcome, Phase
from harness.records.run_record import RunRecord, RunVerdict
from harness.scenario import Case
from harness.server.pool import ServerPool
from harness.signatures.catalogue import Catalogue
from harness.util.clock import now_iso
from harness.util.errors import HarnessError, UserError
from harness.util.interrupts import Shield, sigterm_as_ctrl_c, taken
from harness.util.text import first_line

__all__ = ["execute_run"]


def _serve_guarded(resolved: Resolved, ctx: RunContext, trail: Trail) -> RunVerdict:
    """``serve`` with what stops the harness itself turned into the run's verdict (``interrupted`` for SIGINT
    or SIGTERM, the server torn down)."""
    try:
        return serve(resolved, ctx, trail)
    except UserError:
        raise
    except HarnessError as exc:
        # What stopped the harness itself (a lease that timed out, a tokenizer that is missing) means
        # the product was never tried: infra, in the phase the run had reached.
        phase = Phase.PREFLIGHT if trail.launched is None else Phase.STARTUP
        return RunVerdict(Outcome.INFRA, f"{phase.value}: {first_line(exc)}", phase)
    except KeyboardInterrupt as exc:
        taken()  # the command's first interrupt is this run's verdict; a second signal only hurries now
        return RunVerdict(Outcome.INTERRUPTED, f"interrupted ({first_line(exc) or 'SIGINT'}); "
                          "the server was torn down", phase_reached(trail))
    except OSError as exc:
        # A full disk or a vanished output folder: the harness could not keep the run's artifacts.
        return RunVerdict(Outcome.INFRA, f"harness I/O error: {exc}", None)


def execute_run(
    case: Case,
    build: str | Build | BuildFailure,
    *,
    role: str | None = None,
    trial: int = 0,
    options: RunOptions | None = None,
    pool: ServerPool | None = None,
) -> RunRecord:
    """Run ``case`` on one build once and return its record (also written to ``result.json``).

    ``build`` is resolved already (:func:`resolve_for`, once per command, so a command's trials share one
    resolution); a spec string is resolved here, for this one run. With a ``pool`` (and
    ``server.share_between_trials`` in the scenario) the trial reuses a server an earlier trial started,
    and leaves it there when it passes.
    Raises UserError for a bad build spec (nothing is started), and :class:`RunInterrupted` after writing
    the record of a run stopped by SIGINT or SIGTERM.
    """
    opts = options or RunOptions()
    started = time.monotonic()
    started_at = now_iso()
    resolved = resolve(case, resolve_for(case, build, Builds()) if isinstance(build, str) else build)
    trail = Trail(timings={"resolve": round(time.monotonic() - started, 4)})
    sc = resolved.case.scenario
    label = role or resolved.build.kind
    run_dir = new_run_dir(sc.name, case.name, f"{label}-{version_label(resolved.build)}", trial, opts.out_root)
    paths = RunPaths(run_dir, run_dir / "server.log", run_dir / "requests.jsonl",
                     f"{run_dir.name}-{secrets.token_hex(4)}")
    # A stateful trial (workload phases) never meets a shared or flushed server.
    pool = pool if sc.server.share_between_trials and not sc.stateful else None
    ctx = RunContext(paths, started + sc.timeouts.scenario_s, opts, opts.catalogue or Catalogue.load(), trial, pool)
    with sigterm_as_ctrl_c():
        served = resolved.verdict if isinstance(resolved, Unresolved) else _serve_guarded(resolved, ctx, trail)
        verdict, checks = judge(served, sc.checks, trail.metrics)
        with Shield(reraise=False) as late:  # issue 24: from here a signal only hurries; the record is written
            live = trail.live
            if live is not None and pool is not None and verdict.outcome is not Outcome.PASS:
                # A fresh server after any crash, failed check or interruption: never carry a broken one on.
                with trail.timed("teardown"):
                    trail.teardown = pool.evict(live.key)
            run_record = record(resolved, trail, verdict, checks, paths, role=role, trial=trial, started=started,
                                started_at=started_at)
    if served.outcome is Outcome.INTERRUPTED or late.count or trail.signals_after_judged:
        taken()  # a signal the late shield deferred is the command's first interrupt too
        raise RunInterrupted(run_record)
    return run_record
