"""One run: one case x one build x one trial, from resolving the build to ``result.json`` (design.md, "The flow
of one run"). One module per phase, each returning a small typed record (:mod:`~harness.pipeline.stages`):

1. resolve: the build and its launcher (:mod:`~harness.pipeline.resolve`); a build that cannot be had is infra;
2. pre-flight: prompts, flags parsed by the build's own parser, model files, hardware: nothing started (same);
3. serve: lease a port (and GPUs), start the server in its own process group with its log watched live, ready
   (start-up, then SGLang's own warm-up) or fail fast (:mod:`~harness.pipeline.serve`); the workload while still
   watching (:mod:`~harness.pipeline.drive`), then server-side metrics (:mod:`~harness.pipeline.scrape`);
   teardown always follows (:mod:`~harness.pipeline.teardown`);
4. judge: the scenario's checks on the metrics of a run that got that far, the verdict of a server that died,
   the phase an outcome arose in (:mod:`~harness.pipeline.judge`);
5. record: the typed run record and its artifacts (:mod:`~harness.pipeline.record`).

:func:`execute_run` (:mod:`~harness.pipeline.execute`) runs them in order. Every phase is bounded by the
scenario's timeouts and ends in a verdict. A run interrupted by SIGINT or SIGTERM still tears its server down
and writes its record (outcome ``interrupted``), then raises :class:`RunInterrupted` so the caller stops too.
"""

from __future__ import annotations

from harness.pipeline.execute import execute_run
from harness.pipeline.judge import evaluate_checks
from harness.pipeline.resolve import resolve_for
from harness.pipeline.stages import RunDiskFull, RunInterrupted, RunOptions

__all__ = ["RunDiskFull", "RunInterrupted", "RunOptions", "evaluate_checks", "execute_run", "resolve_for"]
