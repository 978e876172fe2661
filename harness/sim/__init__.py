"""The CPU reference server: a model of SGLang's Frozen-KV MTP mechanism in PyTorch (not SGLang).

It is a real server process that speaks SGLang's native HTTP API and accepts SGLang's launch
flags, so the same scenario runs against it and against real SGLang. Launch it with
``python -m harness.sim.server [SGLang flags] --sim-revision pre-fix|post-fix``.
"""

from __future__ import annotations

__all__ = ["DEFAULT_REVISION", "REFERENCE_SERVER_LABEL", "REVISIONS", "SIM_NAME", "SIM_LABEL", "version_string"]

REVISIONS = ("pre-fix", "post-fix")
# One place decides what a bare launch models; the harness always names a revision explicitly.
DEFAULT_REVISION = "post-fix"
SIM_NAME = "sglang-repro-reference-server"
SIM_LABEL = "[sglang-repro reference server]"
# How the harness names it beside real builds in results and reports.
REFERENCE_SERVER_LABEL = "reference server (CPU model, not SGLang)"


def version_string(revision: str) -> str:
    """The ``version`` the server reports: names the reference server and its revision, never SGLang's."""
    return f"{SIM_NAME}/{revision} (CPU model of SGLang's Frozen-KV MTP; not SGLang)"
