"""Deciding a run: the scenario's checks on its metrics, the verdict of a server that died or never got ready,
and the phase an outcome arose in (design.md, "phase").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from harness.contract import facts as contract
from harness.pipeline.stages import Trail
from harness.records.metric_definitions import OUTPUT_THROUGHPUT, REQUESTS_FAILED, REQUESTS_OK
from harness.records.outcome import Outcome, Phase
from harness.records.run_record import CheckResult, RunVerdict
from harness.scenario.model import Bound, Checks
from harness.server.process import ServerDied, ServerProcess, StartupTimeout
from harness.signatures.catalogue import Match, last_traceback
from harness.util.redact import redact_log
from harness.workload.phases import evaluate_phase_checks

__all__ = ["before_ready_phase", "crash_verdict", "evaluate_checks", "judge", "not_ready_verdict", "phase_reached"]

_EXCERPT_CHARS = 6000


def before_ready_phase(log_text: str, flags: Sequence[str], http_answered: bool = False) -> Phase:
    """Start-up, or SGLang's own warm-up request (the HTTP server was up and warm-up was not skipped).

    From evidence that holds at every ``--log-level`` first: SGLang's warm-up failure line and the
    running-phase SIGQUIT line are ERROR records (the latter means the tokenizer manager had taken a
    request, which before the ready line is the warm-up), and ``http_answered`` means the HTTP server
    answered a health probe (503 while warming up). uvicorn's INFO line, hidden at warning, comes last.
    """
    if contract.WARMUP_FAILED_LINE in log_text:
        return Phase.WARMUP
    if contract.SKIP_SERVER_WARMUP_FLAG in flags:
        return Phase.STARTUP
    if http_answered or contract.CHILD_FAILED_RUNNING_LINE in log_text:
        return Phase.WARMUP
    return Phase.WARMUP if contract.UVICORN_RUNNING in log_text else Phase.STARTUP


def crash_verdict(match: Match | None, log_text: str, exit_code: int | None, phase: Phase) -> RunVerdict:
    """A dead server's verdict: the catalogue's signature when one matched, else ``unknown`` with the last
    exception of its log."""
    if match is not None:
        sig = match.signature
        outcome = Outcome.INFRA if sig.kind == "infra" else Outcome.CRASH
        return RunVerdict(outcome, f"{phase.value}: {sig.title}: {match.line.strip()[:300]}", phase, sig.id,
                          redact_log(match.excerpt)[-_EXCERPT_CHARS:])
    tb = last_traceback(log_text)
    last = tb.strip().splitlines()[-1] if tb else None
    detail = f"; last exception: {last[:300]}" if last else "; no traceback in the log"
    excerpt = tb or "\n".join(log_text.splitlines()[-20:])
    return RunVerdict(Outcome.CRASH, f"{phase.value}: server exited with code {exit_code}{detail}", phase, "unknown",
                      redact_log(excerpt)[-_EXCERPT_CHARS:])


def not_ready_verdict(server: ServerProcess, exc: ServerDied | StartupTimeout, flags: Sequence[str]) -> RunVerdict:
    """The verdict of a start that did not reach ready: in start-up or in SGLang's own warm-up."""
    log_text = server.log_tail(400)
    phase = before_ready_phase(log_text, flags, server.http_answered)
    if isinstance(exc, ServerDied):
        return crash_verdict(exc.crash_match, log_text, exc.server_exit_code, phase)
    return RunVerdict(Outcome.TIMEOUT, f"{phase.value}: {exc}", phase)


def phase_reached(trail: Trail) -> Phase:
    """Where an interrupt found the run, from what its trail holds (the record and the store keep it)."""
    if trail.launched is None and trail.ready is None:
        return Phase.PREFLIGHT
    if trail.ready is None:
        return Phase.STARTUP
    return Phase.WORKLOAD if trail.driven is None else Phase.TEARDOWN


def evaluate_checks(checks: Checks, metrics: Mapping[str, float | None]) -> list[CheckResult]:
    """The scenario's absolute checks on one run's metrics, each with whether it held.

    ``checks.relative`` needs a baseline role and is judged by ``compare``, not here.
    """
    out = []
    ok, bad = int(metrics.get(REQUESTS_OK.name) or 0), int(metrics.get(REQUESTS_FAILED.name) or 0)
    if checks.all_requests_succeed:
        out.append(CheckResult("all requests succeed", held=bool(ok) and not bad,
                               detail=f"{bad} of {ok + bad} requests failed" if bad or not ok else f"{ok} ok"))
    bounds: list[tuple[Bound | None, str, str, str]] = [
        (checks.output_throughput, OUTPUT_THROUGHPUT.name, "output throughput tok/s", "output throughput tok/s")]
    if checks.accept_length is not None:  # it names which of SGLang's acceptance lengths it bounds
        a = checks.accept_length
        bounds.insert(0, (a, a.metric, "accept length", f"accept length ({a.source}: {a.metric})"))
    for bound, name, label, what in bounds:
        # A baseline check alone (no min/max) is judged on the item's trials together (harness.baselines).
        if bound is not None and (bound.min is not None or bound.max is not None):
            problem = bound.violation(metrics.get(name), what)
            out.append(CheckResult(f"{label} within bounds", held=problem is None, detail=problem or ""))
    return out + evaluate_phase_checks(checks, metrics)  # a stateful workload's per-phase and cross-phase checks


def judge(verdict: RunVerdict, checks: Checks, metrics: Mapping[str, float | None]) -> tuple[RunVerdict,
                                                                                           tuple[CheckResult, ...]]:
    """A run that passed so far fails when one of its checks does not hold; any other verdict stands unchecked."""
    if verdict.outcome is not Outcome.PASS:
        return verdict, ()
    results = tuple(evaluate_checks(checks, metrics))
    failed = [c.detail for c in results if not c.held]
    if failed:
        return RunVerdict(Outcome.FAIL, "; ".join(failed), Phase.WORKLOAD), results
    return verdict, results
