"""The CPU reference server: a model of SGLang's Frozen-KV MTP mechanism in PyTorch (not SGLang).

It is a real server process that speaks SGLang's native HTTP API and accepts SGLang's launch
flags, so the same scenario runs against it and against real SGLang. Launch it with
``python -m harness.sim.server [SGLang flags] --sim-revision pre-fix|post-fix``.

Two modelled bugs, each with its own revisions: ``--sim-revision`` is sglang#28264 (the draft's stale
``out_cache_loc``; fixed by PR #29616), ``--sim-draft-cache`` is sglang#32176 (HiCache's load-back restores
the target's KV but not the draft's view of those tokens; harness.sim.radix_cache). They combine, e.g.
``sim:post-fix,draft-cache=pre-fix``.

``--sim-scheduler standin`` (build knob ``scheduler=standin``) swaps the scheduler child for the stand-in
(harness.sim.standin): the same front, HTTP API, flags and log lines, with a deterministic torch-free
computation in place of the model, for tests whose claim is about search logic, not about the model.
"""

from __future__ import annotations

__all__ = ["DEFAULT_REVISION", "DEFAULT_SCHEDULER", "SCHEDULER_ENV", "SCHEDULERS",
           "REFERENCE_SERVER_LABEL", "REVISIONS", "SIM_NAME", "SIM_LABEL", "version_string"]

REVISIONS = ("pre-fix", "post-fix")
# One place decides what a bare launch models; the harness always names a revision explicitly.
DEFAULT_REVISION = "post-fix"
# What computes the tokens: the tiny PyTorch model, or the torch-free stand-in of the reference server
# (harness.sim.standin; a model of this model, itself a model of SGLang). A generated history
# (harness.bisect.demo_repo) may turn this default so that every build of it starts the stand-in.
SCHEDULERS = ("model", "standin")
DEFAULT_SCHEDULER = "model"
# A launch that names no --sim-scheduler takes this variable's value, so a test module can move every reference
# server its commands start (through compare, run, nightly, bisect) to the stand-in at once; the choice is in every
# server's logged ServerArgs (sim_scheduler=...) and in /sim/stats' "scheduler".
SCHEDULER_ENV = "SGLANG_REPRO_SIM_SCHEDULER"
SIM_NAME = "sglang-repro-reference-server"
SIM_LABEL = "[sglang-repro reference server]"
# How the harness names it beside real builds in results and reports.
REFERENCE_SERVER_LABEL = "reference server (CPU model, not SGLang)"


def version_string(revision: str) -> str:
    """The ``version`` the server reports: names the reference server and its revision, never SGLang's."""
    return f"{SIM_NAME}/{revision} (CPU model of SGLang's Frozen-KV MTP; not SGLang)"
