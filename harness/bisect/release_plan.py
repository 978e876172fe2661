"""What each release of a ``bisect --releases`` range should do with the case, said before anything runs.

From each release's build profile (harness.contract.profile, read from its wheel through the release line's
cache; never installed): is PR #29616's fix present, and which draft path the case's flags take there (the eager
rule moved at 0.5.23). A release whose profile cannot be computed says why; the search itself is unchanged: this
is the plan the verdicts are read against.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.scenario import Case
from harness.util.errors import InfraError

__all__ = ["ReleaseExpectation", "expect_per_release"]

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
        p = row.profile
        if p is None:
            out.append(ReleaseExpectation(version, "unknown", f"profile cannot be computed: {row.unavailable}"))
            continue
        steps = int(str(args.get("speculative-num-steps") or 3))
        path = "eager" if p.eager(steps, _graphs_off(args)) else "graph"
        rule = f"{path} path here: eager when {p.eager_rule}"
        if p.fix_present:
            out.append(ReleaseExpectation(version, "pass", f"PR #29616's fix present; {rule}"))
        elif path == "eager":
            out.append(ReleaseExpectation(version, "crash", f"fix absent; {rule}"))
        else:
            out.append(ReleaseExpectation(
                version, "crash only with trtllm_mha and a hybrid SWA pool",
                f"fix absent; {rule}; trtllm_mha's graph-path SWA refill is {p.swa_refill} here"))
    return out
