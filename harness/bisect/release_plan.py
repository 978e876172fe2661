"""What each release of a ``bisect --releases`` range should do with the case, said before anything runs.

From each release's build profile (harness.contract.profile, read from its wheel through the release line's
cache; never installed): is PR #29616's fix present, which draft path the case's flags take there (the eager
rule moved at 0.5.23), and whether that path can copy a stale out_cache_loc (trtllm_mha's SWA refill, read with
its guards: present-but-unreachable from 0.5.19). A release whose profile cannot be computed says why; the
search itself is unchanged: this is the plan the verdicts are read against.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.contract.profile import BuildProfile
from harness.scenario import Case
from harness.util.errors import InfraError

__all__ = ["ReleaseExpectation", "expect_per_release", "expectation"]

_DISABLED = "disabled"


@dataclass(frozen=True)
class ReleaseExpectation:
    """What ``version`` should do with the case: ``expect`` (crash, pass, or unknown) and why, in words."""

    version: str
    expect: str
    why: str

    def line(self) -> str:
        return f"{self.version}: expect {self.expect} ({self.why})"


def _graphs_off(args: Mapping[str, Any]) -> bool:
    if args.get("disable-cuda-graph") is True:
        return True
    return args.get("cuda-graph-backend-decode") == _DISABLED and args.get("cuda-graph-backend-prefill") == _DISABLED


def expectation(profile: BuildProfile, args: Mapping[str, Any]) -> tuple[str, str]:
    """What a build with ``profile`` should do with a Frozen-KV MTP case of server ``args``: (expect, why). The
    graph path can crash only where a Frozen-KV MTP draft reaches an unguarded SWA refill (``swa_refill``, read with
    its guards); from 0.5.15 the in-graph kernel never reads a stale out_cache_loc (contract
    DRAFT_GRAPH_FUSED_SWA_LOC), so a refill that is absent or present-but-unreachable leaves nothing to crash."""
    steps = int(str(args.get("speculative-num-steps") or 3))
    path = "eager" if profile.eager(steps, _graphs_off(args)) else "graph"
    rule = f"{path} path here: eager when {profile.eager_rule}"
    refill = f"trtllm_mha's graph-path SWA refill is {profile.swa_refill} here"
    reach = profile.reach("swa_refill")
    if profile.swa_refill == "present-but-unreachable" and reach is not None:
        refill += f" ({reach.describe(short=True).split(': ', 1)[-1]})"
    if profile.fix_present:
        graph = (f"; were the fix regressed, the graph path would not copy a stale out_cache_loc either: {refill}"
                 if path == "graph" and profile.swa_refill != "unguarded" else "")
        return "pass", f"PR #29616's fix present; {rule}{graph}"
    if path == "eager":
        return "crash", f"fix absent; {rule}"
    if profile.swa_refill == "unguarded":
        return "crash only with trtllm_mha and a hybrid SWA pool", f"fix absent; {rule}; {refill}"
    return "pass", f"fix absent; {rule}; {refill}: the graph path copies no stale out_cache_loc"


def expect_per_release(case: Case, versions: Sequence[str], template: str) -> list[ReleaseExpectation]:
    """Per release: the case's draft path there and whether the stale ``out_cache_loc`` can still reach it.
    Only for real sglang releases (``template`` a ``pip:sglang==`` spec) from the first one profiled on: a
    release built any other way (a checkout's reference server) has no wheel to read, and is not fetched."""
    from packaging.version import InvalidVersion, Version

    from harness.contract.release_line import FIRST_RELEASE, release_row

    args = dict(case.scenario.server.args)
    algo = str(args.get("speculative-algorithm") or "")
    out: list[ReleaseExpectation] = []
    for version in versions:
        try:
            profiled = Version(version) >= Version(FIRST_RELEASE)
        except InvalidVersion:
            profiled = False
        if not template.startswith("pip:sglang==") or not profiled:
            out.append(ReleaseExpectation(version, "unknown", f"{template.format(version=version)} is not an sglang "
                                          f"release from {FIRST_RELEASE} on: no wheel profile to read"))
            continue
        if not algo or algo.upper() == "NONE":
            out.append(ReleaseExpectation(version, "unknown", "not a speculative case: the profile says nothing"))
            continue
        try:
            row = release_row(version)
        except InfraError as exc:
            out.append(ReleaseExpectation(version, "unknown", f"profile cannot be computed: {exc}"))
            continue
        if row.profile is None:
            out.append(ReleaseExpectation(version, "unknown", f"profile cannot be computed: {row.unavailable}"))
            continue
        out.append(ReleaseExpectation(version, *expectation(row.profile, args)))
    return out
