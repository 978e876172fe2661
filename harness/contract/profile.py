"""A build's profile: what the build *is*, read from its own sources. Never a gate.

The contract (:mod:`harness.contract.facts`) is what the harness reads through: a drift there ends a run as
``infra``. The profile is the other kind of knowledge: whether PR #29616's fix is in, when the Frozen-KV MTP draft
runs eagerly rather than through its CUDA graph, which attention backends a topk > 1 draft may use, whether
trtllm_mha's graph path refills its SWA buffer from the live ``out_cache_loc`` (and whether a Frozen-KV MTP draft
can reach that refill at all), the running-request default, and which flags are deprecated. It is computed from
the build's own sources (a wheel, unzipped, never installed, or an installed package), recorded in run records and
reports, and used to say what a case should do on that build; a release whose profile cannot be read says why
(:class:`ProfileUnavailable`), it is never refused for it.

Each item is read from the syntax tree of the release's source (:mod:`ast`, never line windows), together with
the guards of the line that acts, up to its function's entry and, for a derived flag, to where SGLang sets and
refuses it (:mod:`harness.contract.guards`, :mod:`harness.contract.derived`), decided for a Frozen-KV MTP draft
(:data:`FROZEN_KV_MTP_DRAFT`). A line no such draft can reach is *present-but-unreachable*, never the behaviour:
trtllm_mha's SWA refill from 0.5.19 sits inside ``if self.kv_index_translator.is_translating:``, which needs
``--enable-unified-memory``, which SGLang refuses for FROZEN_KV_MTP. Every item keeps the ``file:line`` it was read
from (``evidence``) and its guard chain (``guards``), so a profile can be checked by eye.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.contract.derived import DERIVED, FROZEN_KV_MTP_DRAFT
from harness.contract.guards import Reach, Resolver, function_nodes, in_source_order, key_of, nodes_of, reach_of, tree_of
from harness.contract.sources import Sources

__all__ = ["FROZEN_KV_MTP_DRAFT", "SWA_REFILLS", "BuildProfile", "DeprecatedFlag", "ProfileUnavailable",
           "compute_profile", "describe_profile"]

_WORKERS = ("srt/speculative/frozen_kv_mtp_worker_v2.py", "srt/speculative/frozen_kv_mtp_worker.py")
_TRT = "srt/layers/attention/trtllm_mha_backend.py"
_ARGS = "srt/server_args.py"
_HOOK = "srt/arg_groups/speculative_hook.py"
# Where the per-algorithm handler is dispatched from 0.5.19 (spec_info.py 0.5.23 :262)
_SPEC_INFO = "srt/speculative/spec_info.py"
# swa_refill: no copy in init_forward_metadata_out_graph; a copy behind a length check; one with only a None
# check; a copy whose guards a Frozen-KV MTP draft cannot satisfy.
SWA_REFILLS = ("none", "guarded", "unguarded", "present-but-unreachable")


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
    refill (:data:`SWA_REFILLS`); ``guards``: per item, the line that acts and its guard chain."""

    version: str
    fix_present: bool
    eager_max_steps: int
    graphs_off: str
    topk_backends: tuple[str, ...]
    swa_refill: str
    max_running_default: int | None
    deprecated: tuple[DeprecatedFlag, ...]
    evidence: tuple[tuple[str, str], ...]
    guards: tuple[tuple[str, Reach], ...] = ()

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

    def reach(self, item: str) -> Reach | None:
        """The line behind ``item`` (a field name, or ``deprecated --flag``) and its guards."""
        return next((r for name, r in self.guards if name == item), None)

    def to_json(self) -> dict[str, object]:
        return {"version": self.version, "fix_present": self.fix_present, "eager_rule": self.eager_rule,
                "eager_max_steps": self.eager_max_steps, "graphs_off": self.graphs_off,
                "topk_backends": list(self.topk_backends), "swa_refill": self.swa_refill,
                "max_running_default": self.max_running_default,
                "deprecated": [{"flag": d.flag, "replacement": d.replacement, "where": d.where}
                               for d in self.deprecated],
                "evidence": dict(self.evidence), "guards": {name: r.to_json() for name, r in self.guards}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BuildProfile:
        """The profile :meth:`to_json` wrote (the release line's cache)."""
        return cls(version=str(data["version"]), fix_present=bool(data["fix_present"]),
                   eager_max_steps=int(data["eager_max_steps"]), graphs_off=str(data["graphs_off"]),
                   topk_backends=tuple(str(b) for b in data["topk_backends"]), swa_refill=str(data["swa_refill"]),
                   max_running_default=data["max_running_default"],
                   deprecated=tuple(DeprecatedFlag(d["flag"], d["replacement"], d["where"]) for d in data["deprecated"]),
                   evidence=tuple((str(k), str(v)) for k, v in data["evidence"].items()),
                   guards=tuple((str(k), Reach.from_json(v)) for k, v in (data.get("guards") or {}).items()))


@dataclass(frozen=True)
class _Read:
    """One source file of the release: its path, syntax tree, nodes in source order and the resolver deciding
    its guards."""

    path: str
    tree: ast.Module
    nodes: tuple[ast.AST, ...]
    resolver: Resolver

    def reach(self, node: ast.AST) -> Reach:
        return reach_of(self.path, self.tree, node.lineno, self.resolver)  # type: ignore[attr-defined]


def _read(sources: Sources, path: str, **env: Any) -> _Read | None:
    text = sources.text(path)
    tree = None if text is None else tree_of(text)
    if text is not None and tree is None:
        raise ProfileUnavailable(f"{path} does not parse as Python; nothing in it can be read")
    if text is None or tree is None:
        return None
    return _Read(path, tree, nodes_of(text), Resolver(sources, {**FROZEN_KV_MTP_DRAFT, **env}, DERIVED))


def _exits(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise))


def _eager_rule(read: _Read) -> tuple[ast.If, int, str] | None:
    """``if <graphs off> or self.speculative_num_steps <= N: return`` (the draft's CUDA graph skipped)."""
    for node in in_source_order([n for n in read.nodes if isinstance(n, ast.If)]):
        test = node.test
        if not (_exits(node.body) and isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or)):
            continue
        steps = [v for v in test.values if isinstance(v, ast.Compare) and key_of(v.left) == "speculative_num_steps"
                 and isinstance(v.ops[0], ast.LtE) and isinstance(v.comparators[0], ast.Constant)]
        others = [key_of(v) for v in test.values if v not in steps]
        if steps and others and others[0] in ("cuda_graph_fully_disabled()", "disable_cuda_graph"):
            bound = steps[0].comparators[0]
            if isinstance(bound, ast.Constant) and isinstance(bound.value, int):
                return node, bound.value, str(others[0]).removesuffix("()")
    return None


def _draft_worker(sources: Sources) -> tuple[_Read, ast.If, int, str]:
    """The file the Frozen-KV MTP draft worker's code is in: ``_v2`` from 0.5.14 on; before, ``_v2`` is a thin
    subclass of ``frozen_kv_mtp_worker.py``, which holds it (0.5.13.post1 :563 ``def draft``)."""
    for path in _WORKERS:
        read = _read(sources, path)
        rule = _eager_rule(read) if read else None
        if read and rule:
            return (read, *rule)
    raise ProfileUnavailable("no Frozen-KV MTP draft worker with an eager rule ('if <graphs off> or "
                             "self.speculative_num_steps <= N: return' in speculative/frozen_kv_mtp_worker*.py) in "
                             "this release")


def _fix(worker: _Read) -> ast.Assign | None:
    """PR #29616's line in ``draft()``: ``forward_batch.out_cache_loc = None``."""
    for func in function_nodes(worker.nodes, "draft"):
        for node in ast.walk(func):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is None
                    and any(isinstance(t, ast.Attribute) and t.attr == "out_cache_loc" and key_of(t.value) == "forward_batch"
                            for t in node.targets)):
                return node
    return None


def _topk_backends(sources: Sources, worker: _Read) -> tuple[tuple[str, ...], Reach | None]:
    """The backends with which ``_init_draft_attn_backend`` returns (rather than raises) for topk > 1, decided by
    each return's guards, and the reach of the return of the last of them."""
    backends: list[str] = []
    last: Reach | None = None
    for func in function_nodes(worker.nodes, "_init_draft_attn_backend"):
        named = sorted({c.value for n in ast.walk(func) if isinstance(n, ast.Compare) and key_of(n.left) == "backend_type"
                        for c in n.comparators if isinstance(c, ast.Constant) and isinstance(c.value, str)})
        for backend in named:
            env = {**FROZEN_KV_MTP_DRAFT, "topk": 2, "backend_type": backend}
            read = _Read(worker.path, worker.tree, worker.nodes, Resolver(sources, env, DERIVED))
            returns = [r for n in ast.walk(func) if isinstance(n, ast.Return) and (r := read.reach(n)).reachable is not False]
            if returns and backend not in backends:
                backends.append(backend)
                last = returns[0]
    return tuple(backends), last


def _swa_copies(trt: _Read) -> list[tuple[ast.Call, Reach]]:
    """``self.cuda_graph_swa_out_cache_loc[:n].copy_(...)`` in every ``init_forward_metadata_out_graph``."""
    found = []
    for func in function_nodes(trt.nodes, "init_forward_metadata_out_graph"):
        for node in ast.walk(func):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "copy_"
                    and isinstance(node.func.value, ast.Subscript)
                    and key_of(node.func.value.value) == "cuda_graph_swa_out_cache_loc"):
                found.append((node, trt.reach(node)))
    return sorted(found, key=lambda f: f[0].lineno)


def _length_checked(reach: Reach) -> bool:
    # triton's guard (triton_backend.py 0.5.14 :571): a live out_cache_loc longer than the buffer is not copied
    return any("out_cache_loc.shape[0] >" in g.test and "cuda_graph_swa_out_cache_loc.shape[0]" in g.test
               for g in reach.guards)


def _swa_refill(trt: _Read | None) -> tuple[str, Reach | None]:
    copies = _swa_copies(trt) if trt else []
    if not copies:
        return "none", None
    live = [r for _, r in copies if r.reachable is not False]
    if not live:
        return "present-but-unreachable", copies[0][1]
    unguarded = [r for r in live if not _length_checked(r)]
    return ("unguarded", unguarded[0]) if unguarded else ("guarded", live[0])


def _int_setting(node: ast.AST, name: str) -> int | None:
    """``x.<name> = <int>`` or ``<name>=<int>`` (a keyword: declare_resolution from 0.5.19): the int, else None."""
    value: ast.AST | None = None
    if (isinstance(node, ast.Assign) and any(key_of(t) == name for t in node.targets)) or (
            isinstance(node, ast.keyword) and node.arg == name):
        value = node.value
    if isinstance(value, ast.Constant) and isinstance(value.value, int) and not isinstance(value.value, bool):
        return value.value
    return None


def _call_sites(sources: Sources, function: str) -> list[Reach]:
    """The guards of each call of ``function`` in the files that dispatch the per-algorithm handlers."""
    out = []
    for path in (_HOOK, _ARGS, _SPEC_INFO):
        read = _read(sources, path)
        for node in read.nodes if read else ():
            if read and isinstance(node, ast.Call) and key_of(node.func) == function:
                out.append(read.reach(node))
    return out


def _max_running(sources: Sources) -> tuple[int | None, Reach | None]:
    """The running-request default a Frozen-KV MTP draft gets with --max-running-requests unset: an int setting
    whose guards a Frozen-KV MTP server reaches, inside a FROZEN_KV_MTP branch or its handler
    (``_handle_frozen_kv_mtp``, whose call sites' guards are added to its chain)."""
    for path in (_HOOK, _ARGS):
        read = _read(sources, path)
        picked = [n for n in read.nodes if isinstance(n, (ast.Assign, ast.keyword))] if read else []
        for node in in_source_order(picked):
            value = _int_setting(node, "max_running_requests")
            if value is None or read is None:
                continue
            reach = read.reach(node)
            handler = (reach.function or "").split(".")[-1]
            branch = any(g.holds and "speculative_algorithm" in g.test for g in reach.guards)
            if handler == "_handle_frozen_kv_mtp":
                sites = _call_sites(sources, handler)
                reach = Reach(reach.line, reach.function, reach.guards + (sites[0].guards if sites else ()))
            elif not branch:
                continue
            if reach.reachable is not False:
                return value, reach
    return None, None


def _deprecated(sources: Sources) -> tuple[tuple[DeprecatedFlag, ...], list[tuple[str, Reach]]]:
    """Flags registered with a Deprecated*Action in server_args.py (a warning, "will be removed"), each with the
    ``new_flag=`` keyword of its call wherever in the call it stands."""
    read = _read(sources, _ARGS)
    found: list[DeprecatedFlag] = []
    reaches: list[tuple[str, Reach]] = []
    calls = [n for n in read.nodes if isinstance(n, ast.Call) and key_of(n.func) == "add_argument"] if read else []
    for node in in_source_order(calls):
        if not (read and isinstance(node, ast.Call)):
            continue
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        action = key_of(keywords["action"]) if "action" in keywords else None
        if not (action and action.startswith("Deprecated")):
            continue
        new = keywords.get("new_flag")
        replacement = new.value if isinstance(new, ast.Constant) and isinstance(new.value, str) else None
        for arg in node.args:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--"):
                found.append(DeprecatedFlag(arg.value, replacement, f"{_ARGS}:{arg.lineno}"))
                reaches.append((f"deprecated {arg.value}", read.reach(node)))
    return tuple(found), reaches


def compute_profile(sources: Sources, version: str) -> BuildProfile:
    """The profile of release ``version`` from its sources; ProfileUnavailable (saying why) where it cannot be read."""
    worker, rule, steps, graphs_off = _draft_worker(sources)
    guards: list[tuple[str, Reach]] = [("eager_rule", worker.reach(rule))]
    evidence = [("eager_rule", f"{worker.path}:{rule.lineno}")]
    fix = _fix(worker)
    fix_reach = worker.reach(fix) if fix else None
    evidence.insert(0, ("fix_present", f"{worker.path}:{fix.lineno}" if fix
                        else f"{worker.path}: no 'forward_batch.out_cache_loc = None' in draft()"))
    if fix_reach:
        guards.insert(0, ("fix_present", fix_reach))
    backends, last = _topk_backends(sources, worker)
    if last is not None:
        evidence.append(("topk_backends", last.line))
        guards.append(("topk_backends", last))
    refill, refill_reach = _swa_refill(_read(sources, _TRT))
    if refill_reach:
        evidence.append(("swa_refill", refill_reach.line))
        guards.append(("swa_refill", refill_reach))
    max_running, running_reach = _max_running(sources)
    if running_reach:
        evidence.append(("max_running_default", running_reach.line))
        guards.append(("max_running_default", running_reach))
    deprecated, dep_reaches = _deprecated(sources)
    evidence += [(f"deprecated {d.flag}", d.where) for d in deprecated]
    return BuildProfile(version=version, fix_present=fix_reach is not None and fix_reach.reachable is not False,
                        eager_max_steps=steps, graphs_off=graphs_off, topk_backends=backends or ("triton",),
                        swa_refill=refill, max_running_default=max_running, deprecated=deprecated,
                        evidence=tuple(evidence), guards=tuple(guards + dep_reaches))


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
