"""Derived flags followed to where SGLang sets and refuses them, read from a release's syntax tree.

A guard on a server argument is decided by the case's flags; a guard on a value SGLang computes from them needs
the computation. Here the one the release line meets: ``kv_index_translator.is_translating`` (trtllm_mha's
graph-path SWA refill sits inside ``if self.kv_index_translator.is_translating:`` from 0.5.19,
``trtllm_mha_backend.py`` 0.5.19 :904, 0.5.23 :1142). It is set in ``KVIndexTranslator.__init__`` from the
allocator's class, a ``Unified*TokenToKVPoolAllocator`` (``kv_index_translator.py`` 0.5.23 :112-118); those pools
are built only under ``--enable-unified-memory`` (``kv_cache_configurator.py`` 0.5.23 :599-602); and
``handle_unified_memory_pool`` refuses that flag for any speculative algorithm it has not audited
(``kv_cache_hook.py`` 0.5.19 :224-229, 0.5.21 :545-550, 0.5.23 :588-600), run after the speculative hook
promotes NEXTN to FROZEN_KV_MTP for a Gemma-4 assistant draft (``arg_groups/pipeline.py``). Each link is located
in the release's own tree each time; where one cannot be found the flag is left to the case (None), never guessed.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from harness.contract.guards import SET, UNKNOWN, Derivation, Resolver, conditions_of, key_of, nodes_of, tree_of
from harness.contract.sources import Sources

__all__ = ["DERIVED", "FROZEN_KV_MTP_DRAFT", "is_translating"]

_TRANSLATOR = "srt/mem_cache/kv_index_translator.py"
_CONFIGURATOR = "srt/mem_cache/kv_cache_configurator.py"
_HOOKS = ("srt/arg_groups/kv_cache_hook.py", "srt/server_args.py")
_PIPELINE = "srt/arg_groups/pipeline.py"
_FLAG = "enable_unified_memory"
_PROMOTES = "handle_speculative_decoding"
_CHECKS = "handle_unified_memory_pool"
# The case every profile item is decided for: a Frozen-KV MTP draft (a Gemma-4 assistant draft given as NEXTN,
# promoted by the speculative hook), a decode batch at graph replay, on a hybrid SWA pool, with a live (stale)
# out_cache_loc reaching the backend, --max-running-requests unset. Any other flag is the case's to decide.
FROZEN_KV_MTP_DRAFT: Mapping[str, Any] = {
    "speculative_algorithm": "FROZEN_KV_MTP", "speculative_algorithm_given": "NEXTN",
    "is_frozen_kv_mtp()": True, "is_dflash()": False, "is_dspark()": False, "is_eagle()": False,
    "is_standalone()": False, "is_ngram()": False, "is_uno()": False, "is_idle()": False, "in_capture": False,
    "use_sliding_window_kv_pool": True, "out_cache_loc": SET, "max_running_requests": None,
    # the draft's replay view is a DECODE batch (frozen_kv_mtp_worker_v2.py 0.5.23 :360, 0.5.14 :336)
    "is_decode_or_idle()": True, "is_target_verify()": False, "is_draft_extend_v2()": False,
}


def _tree(sources: Sources, path: str) -> ast.Module | None:
    text = sources.text(path)
    return None if text is None else tree_of(text)


def _nodes(sources: Sources, path: str) -> tuple[ast.AST, ...]:
    text = sources.text(path)
    return () if text is None else nodes_of(text)


def _span(path: str, node: ast.AST) -> str:
    first, last = node.lineno, node.end_lineno or node.lineno  # type: ignore[attr-defined]
    return f"{path}:{first}" if first == last else f"{path}:{first}-{last}"


def _mentions(node: ast.AST, key: str) -> bool:
    return any(key_of(n) == key for n in ast.walk(node))


def _unified_classes(node: ast.AST) -> tuple[str, ...]:
    return tuple(sorted({n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id.startswith("Unified")
                         and n.id.endswith(("Allocator", "AllocatorBase"))}))


def _where_set(sources: Sources) -> list[str] | None:
    """``self.is_translating = ...`` and each of its terms (a local name is followed to its assignment in the same
    function): a Unified* allocator, or a fused draft pool; None where a term is neither (the chain stops)."""
    funcs = [n for n in _nodes(sources, _TRANSLATOR) if isinstance(n, ast.FunctionDef)]
    for func in funcs:
        for node in ast.walk(func):
            if not (isinstance(node, ast.Assign) and any(key_of(t) == "is_translating" for t in node.targets)):
                continue
            links = [f"{_span(_TRANSLATOR, node)}: is_translating = {ast.unparse(node.value)}"]
            terms = [n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)]
            local = {t.id: a for a in ast.walk(func) if isinstance(a, ast.Assign) for t in a.targets
                     if isinstance(t, ast.Name) and t.id in terms}
            for term in [node.value] if _unified_classes(node.value) else list(local.values()):
                classes = _unified_classes(term)
                if classes:
                    links.append(f"{_span(_TRANSLATOR, term)}: needs a {' or '.join(classes)}")
                elif "fused_draft" in ast.unparse(term):
                    links.append(f"{_span(_TRANSLATOR, term)}: needs a fused draft pool")
                else:
                    return None
            return links
    return None


def _built_under_flag(sources: Sources) -> list[str]:
    """Where the pools behind those terms are built, each under its guard: a unified pool
    (``..._init_unified_*pools(``) under ``--enable-unified-memory``, a fused draft pool (``bind_fused_draft(``)
    over a Unified* target allocator; empty where any is built without it (the link does not hold)."""
    tree = _tree(sources, _CONFIGURATOR)
    if tree is None:
        return []
    found: dict[str, list[str]] = {}
    for node in _nodes(sources, _CONFIGURATOR):
        name = (key_of(node.func) if isinstance(node, ast.Call) else None) or ""
        unified = name.startswith("_init_unified_") and name.endswith("pools")
        fused = name == "bind_fused_draft"
        if not (unified or fused) or not isinstance(node, ast.Call):
            continue
        _, conds, _ = conditions_of(tree, node.lineno)
        need = [c for c in conds if not c.negated and (_mentions(c.node, _FLAG) if unified else _unified_classes(c.node))]
        if not need:
            return []
        what = "with --enable-unified-memory" if unified else "over a Unified* target allocator (unified memory)"
        found.setdefault(f"{_CONFIGURATOR}:{need[-1].first}: built only {what}", []).append(str(name))
    return [f"{where} ({', '.join(names)})" for where, names in found.items()]


def _promoted_first(sources: Sources) -> str | None:
    """``pipeline.py:A < :B`` when the speculative hook (which promotes NEXTN) runs before the unified-memory
    check in the resolution pipeline; None where that order cannot be read."""
    calls: dict[str, int] = {}
    for node in _nodes(sources, _PIPELINE):
        if isinstance(node, ast.Call):
            for part in (node.func, *node.args):
                name = key_of(part)
                if name in (_PROMOTES, _CHECKS):
                    calls.setdefault(str(name), node.lineno)
    if len(calls) == 2 and calls[_PROMOTES] < calls[_CHECKS]:
        return f"{_PIPELINE}:{calls[_PROMOTES]} < :{calls[_CHECKS]}"
    return None


def _refusal(sources: Sources, env: Mapping[str, Any], algorithms: tuple[str, ...]) -> str | None:
    """Where ``--enable-unified-memory`` is refused for every one of ``algorithms`` (an assert on
    speculative_algorithm that the function reaches whenever the flag is on), or None."""
    for path in _HOOKS:
        tree = _tree(sources, path)
        for func in _nodes(sources, path):
            if not isinstance(func, ast.FunctionDef) or func.name != _CHECKS or tree is None:
                continue
            for node in ast.walk(func):
                if not isinstance(node, ast.Assert) or not _mentions(node.test, "speculative_algorithm"):
                    continue
                _, conds, _ = conditions_of(tree, node.lineno)
                refused = True
                for algorithm in algorithms:
                    resolver = Resolver(sources, {**env, _FLAG: True, "speculative_algorithm": algorithm})
                    reached = all(resolver.truth(c.node)[0] is (not c.negated) for c in conds)
                    if not reached or resolver.truth(node.test)[0] is not False:
                        refused = False
                if refused:
                    return _span(path, node)
    return None


def is_translating(sources: Sources, env: Mapping[str, Any]) -> tuple[Any, tuple[str, ...]]:
    """Whether the KV index translator translates for the case, and the chain that decides it."""
    set_at = _where_set(sources)
    built = _built_under_flag(sources)
    if set_at is None or not built:
        return UNKNOWN, ()
    chain = [*set_at, *built]
    if env.get(_FLAG) is False:
        return False, (*chain, "the case does not pass --enable-unified-memory")
    algorithm = env.get("speculative_algorithm", UNKNOWN)
    if algorithm is UNKNOWN:
        return UNKNOWN, tuple(chain)
    order = _promoted_first(sources)
    given = env.get("speculative_algorithm_given", algorithm)
    algorithms = (algorithm,) if order else tuple(dict.fromkeys((given, algorithm)))
    refused = _refusal(sources, env, algorithms)
    if refused is None:
        return (True if env.get(_FLAG) is True else UNKNOWN), tuple(chain)
    after = f", checked after the promotion ({order})" if order else ""
    return False, (*chain, f"{refused}: --enable-unified-memory refused for --speculative-algorithm "
                           f"{'/'.join(map(str, algorithms))}{after}")


DERIVED: dict[str, Derivation] = {"is_translating": is_translating}
