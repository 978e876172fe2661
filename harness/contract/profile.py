"""A build's profile: what the build *is*, read from its own sources. Never a gate.

The contract (:mod:`harness.contract.facts`) is what the harness reads through: a drift there ends a run as
``infra``. The profile is the other kind of knowledge: whether PR #29616's fix is in, when the Frozen-KV MTP draft
runs eagerly rather than through its CUDA graph, which attention backends a topk > 1 draft may use, whether
trtllm_mha's graph path refills its SWA buffer unguarded, the running-request default, and which flags are
deprecated. It is computed from the build's own sources (a wheel, unzipped, never installed, or an installed
package), recorded in run records and reports, and used to say what a case should do on that build; a release
whose profile cannot be read says why (:class:`ProfileUnavailable`), it is never refused for it.

Every item keeps the ``file:line`` it was read from (``evidence``), so a profile can be checked by eye.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.contract.facts import FIX_MARKER
from harness.contract.locate import defs
from harness.contract.sources import Sources, lines_of

__all__ = ["BuildProfile", "DeprecatedFlag", "ProfileUnavailable", "compute_profile", "describe_profile"]

_WORKERS = ("srt/speculative/frozen_kv_mtp_worker_v2.py", "srt/speculative/frozen_kv_mtp_worker.py")
_TRT = "srt/layers/attention/trtllm_mha_backend.py"
_ARGS = "srt/server_args.py"
_HOOK = "srt/arg_groups/speculative_hook.py"
# _capture_cuda_graphs' early return: ``if <graphs off> or self.speculative_num_steps <= N: return``
_EAGER = re.compile(r"if (cuda_graph_fully_disabled\(\)|self\.server_args\.disable_cuda_graph) "
                    r"or self\.speculative_num_steps <= (\d+):")
_SWA_COPY = "self.cuda_graph_swa_out_cache_loc[:n].copy_("
# triton's guard (triton_backend.py 0.5.14 :571): a live out_cache_loc longer than the buffer is not copied
_SWA_GUARD = re.compile(r"out_cache_loc\.shape\[0\]\s*>\s*self\.cuda_graph_swa_out_cache_loc\.shape\[0\]")
_MAX_RUNNING = re.compile(r"max_running_requests ?= ?(\d+)")  # an assignment; from 0.5.19 a keyword argument
_FLAG = re.compile(r'^\s*"(--[a-z0-9-]+)",\s*$')
_NEW_FLAG = re.compile(r'new_flag="([^"]+)"')


class ProfileUnavailable(Exception):
    """The build's profile cannot be read from its sources; the message says why."""


@dataclass(frozen=True)
class DeprecatedFlag:
    """A flag the build still accepts but warns about ("will be removed"), and what it says to use instead."""

    flag: str
    replacement: str | None
    where: str  # file:line


@dataclass(frozen=True)
class BuildProfile:
    """What one build is. ``eager_max_steps``: the draft runs eagerly at ``--speculative-num-steps`` <= this;
    ``graphs_off``: the other eager condition, in the build's words; ``swa_refill``: trtllm_mha's graph-path SWA
    refill, ``unguarded`` (only a None check), ``guarded`` (a length check) or ``none`` (no refill there)."""

    version: str
    fix_present: bool
    eager_max_steps: int
    graphs_off: str
    topk_backends: tuple[str, ...]
    swa_refill: str
    max_running_default: int | None
    deprecated: tuple[DeprecatedFlag, ...]
    evidence: tuple[tuple[str, str], ...]

    @property
    def eager_rule(self) -> str:
        """The condition under which a frozen draft runs eagerly, in words."""
        steps = ("--speculative-num-steps <= 0 (never for a drafting server: a one-step draft is captured too)"
                 if self.eager_max_steps <= 0 else f"--speculative-num-steps <= {self.eager_max_steps}")
        off = ("--disable-cuda-graph" if self.graphs_off == "disable_cuda_graph"
               else "CUDA graphs disabled for decode and prefill (cuda_graph_fully_disabled())")
        return f"{off}, or {steps}"

    def eager(self, num_steps: int, graphs_disabled: bool) -> bool:
        """Whether a draft with ``num_steps`` steps runs the eager path on this build."""
        return graphs_disabled or num_steps <= self.eager_max_steps

    def replacement(self, flag: str) -> DeprecatedFlag | None:
        return next((d for d in self.deprecated if d.flag == flag), None)

    def to_json(self) -> dict[str, object]:
        return {"version": self.version, "fix_present": self.fix_present, "eager_rule": self.eager_rule,
                "eager_max_steps": self.eager_max_steps, "graphs_off": self.graphs_off,
                "topk_backends": list(self.topk_backends), "swa_refill": self.swa_refill,
                "max_running_default": self.max_running_default,
                "deprecated": [{"flag": d.flag, "replacement": d.replacement, "where": d.where}
                               for d in self.deprecated],
                "evidence": dict(self.evidence)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BuildProfile:
        """The profile :meth:`to_json` wrote (the release line's cache)."""
        return cls(version=str(data["version"]), fix_present=bool(data["fix_present"]),
                   eager_max_steps=int(data["eager_max_steps"]), graphs_off=str(data["graphs_off"]),
                   topk_backends=tuple(str(b) for b in data["topk_backends"]), swa_refill=str(data["swa_refill"]),
                   max_running_default=data["max_running_default"],
                   deprecated=tuple(DeprecatedFlag(d["flag"], d["replacement"], d["where"]) for d in data["deprecated"]),
                   evidence=tuple((str(k), str(v)) for k, v in data["evidence"].items()))


def _find(lines: tuple[str, ...], needle: str, span: tuple[int, int] | None = None) -> int | None:
    first, last = span or (1, len(lines))
    return next((i for i in range(first, last + 1) if needle in lines[i - 1]), None)


def _draft_worker(sources: Sources) -> tuple[str, tuple[str, ...]]:
    """The file the Frozen-KV MTP draft worker's code is in: ``_v2`` from 0.5.14 on; before, ``_v2`` is a thin
    subclass of ``frozen_kv_mtp_worker.py``, which holds it (0.5.13.post1 :563 ``def draft``)."""
    for path in _WORKERS:
        lines = lines_of(sources, path)
        if lines is not None and any(_EAGER.search(line) for line in lines):
            return path, lines
    raise ProfileUnavailable("no Frozen-KV MTP draft worker with an eager rule ('if <graphs off> or "
                             "self.speculative_num_steps <= N:' in speculative/frozen_kv_mtp_worker*.py) in this release")


def _spans(lines: tuple[str, ...], name: str) -> list[tuple[int, int]]:
    """The spans of every def called ``name`` (any class), via the contract's own def index."""
    return [(start, end) for qual, start, end in defs(lines) if qual.split(".")[-1] == name]


def _deprecated(sources: Sources) -> tuple[DeprecatedFlag, ...]:
    """Flags registered with a Deprecated*Action in server_args.py (a warning, "will be removed")."""
    lines = lines_of(sources, _ARGS) or ()
    found: list[DeprecatedFlag] = []
    for i, line in enumerate(lines):
        match = _FLAG.match(line)
        if not match:
            continue
        window = lines[i + 1:i + 4]
        if not any("action=Deprecated" in w for w in window):
            continue
        new = next((m.group(1) for w in window if (m := _NEW_FLAG.search(w))), None)
        found.append(DeprecatedFlag(match.group(1), new, f"{_ARGS}:{i + 1}"))
    return tuple(found)


def compute_profile(sources: Sources, version: str) -> BuildProfile:
    """The profile of release ``version`` from its sources; ProfileUnavailable (saying why) where it cannot be read."""
    path, lines = _draft_worker(sources)
    evidence: list[tuple[str, str]] = []
    draft = _spans(lines, "draft")
    fix = next((at for span in draft if (at := _find(lines, FIX_MARKER, span))), None)
    evidence.append(("fix_present", f"{path}:{fix}" if fix else f"{path}: no {FIX_MARKER!r} in draft()"))
    # _capture_cuda_graphs from 0.5.14 on; before it, the draft graph runner's own set-up (0.5.13.post1 :322)
    rule = next(((i, m) for i, line in enumerate(lines, start=1) if (m := _EAGER.search(line))), None)
    assert rule is not None  # _draft_worker chose the file by it
    evidence.append(("eager_rule", f"{path}:{rule[0]}"))
    init = _spans(lines, "_init_draft_attn_backend")
    trt = next((at for span in init if (at := _find(lines, 'backend_type == "trtllm_mha"', span))), None)
    only = next((at for span in init if (at := _find(lines, "currently supports only the triton", span))), None)
    backends = ("triton", "trtllm_mha") if trt else ("triton",)
    if trt or only:
        evidence.append(("topk_backends", f"{path}:{trt or only}"))
    trt_lines = lines_of(sources, _TRT) or ()
    refill, copies = "none", []
    for span in _spans(trt_lines, "init_forward_metadata_out_graph"):
        copies += [i for i in range(span[0], span[1] + 1) if _SWA_COPY in trt_lines[i - 1]]
        if any(_SWA_GUARD.search(trt_lines[i - 1]) for i in range(span[0], span[1] + 1)):
            refill = "guarded"
    if copies:
        refill = "guarded" if refill == "guarded" else "unguarded"
        evidence.append(("swa_refill", f"{_TRT}:" + ",".join(map(str, copies))))
    max_running = None
    for file in (_HOOK, _ARGS):
        hook = lines_of(sources, file) or ()
        for span in _spans(hook, "_handle_frozen_kv_mtp"):
            hit = next(((i, m) for i in range(span[0], span[1] + 1) if (m := _MAX_RUNNING.search(hook[i - 1]))), None)
            if hit:
                max_running = int(hit[1].group(1))
                evidence.append(("max_running_default", f"{file}:{hit[0]}"))
                break
        if max_running is not None:
            break
    deprecated = _deprecated(sources)
    evidence += [(f"deprecated {d.flag}", d.where) for d in deprecated]
    return BuildProfile(version=version, fix_present=fix is not None, eager_max_steps=int(rule[1].group(2)),
                        graphs_off="disable_cuda_graph" if "disable_cuda_graph" in rule[1].group(1)
                        else "cuda_graph_fully_disabled", topk_backends=backends, swa_refill=refill,
                        max_running_default=max_running, deprecated=deprecated, evidence=tuple(evidence))



def describe_profile(data: Mapping[str, Any] | None) -> str:
    """A run record's build profile (``BuildProfile.to_json``, the reference server's rules, or
    ``{"unavailable": why}``) in one line for reports; "" for none."""
    if not data:
        return ""
    if "unavailable" in data:
        return f"profile unavailable: {data['unavailable']}"
    if "rules" in data:
        return f"follows sglang {data['rules']}'s rules (eager at --speculative-num-steps <= {data['eager_max_steps']})"
    fix = "fix #29616 present" if data.get("fix_present") else "fix #29616 absent"
    return f"{fix}; eager when {data.get('eager_rule')}; trtllm_mha graph SWA refill {data.get('swa_refill')}"
