"""From parsed SGLang flags to the scheduler's settings, with SGLang's start-up decisions.

Decisions modelled: NEXTN/EAGLE with a ``Gemma4AssistantForCausalLM`` draft is promoted to
FROZEN_KV_MTP; the draft's quantization inherits ``--quantization`` unless
``--speculative-draft-model-quantization`` is given (``unquant``: none), and a draft whose checkpoint is
not quantized cannot load with a ModelOpt method (harness.contract.facts.DRAFT_QUANTIZATION_UNQUANT); the
draft CUDA graph is skipped (eager path) when CUDA graphs are disabled for both decode and prefill
(``--disable-cuda-graph``, or ``--cuda-graph-backend-decode/-prefill disabled``) or
``--speculative-num-steps <= 1`` (``<= 0`` with ``--sim-rules 0.5.23``, harness.sim.release_rules); the draft's
attention backend is
``--speculative-draft-attention-backend``, else ``--decode-attention-backend``, else
``--attention-backend`` (Gemma-4's default: trtllm_mha on SM100, triton elsewhere, as SGLang; the
model's "GPU" is ``--sim-gpu-sm``, else its device's: CPU is none), and
Frozen-KV MTP with topk > 1 supports only triton; ``--max-running-requests`` defaults to 48 for
Frozen-KV MTP (harness.contract.facts.FROZEN_KV_MTP_MAX_RUNNING_DEFAULT).
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass

from harness.sim import SIM_LABEL
from harness.sim.cli_args import parse_position_drop
from harness.sim.model_config import TinyConfig, resolve_model
from harness.sim.release_rules import DEFAULT_RULES, ReleaseRules, rules_for
from harness.sim.sglang_words import (
    DRAFT_QUANTIZATION_UNQUANT,
    ENV_FALSE,
    ENV_TRUE,
    FROZEN_KV_MTP_MAX_RUNNING_DEFAULT,
    HEALTH_CHECK_TIMEOUT_ENV,
    HEALTH_CHECK_TIMEOUT_S,
    HEALTH_GENERATION_DEFAULT,
    HEALTH_GENERATION_ENV,
)

__all__ = ["SettingsError", "SchedulerSettings", "resolve_settings", "health_settings"]

logger = logging.getLogger(__name__)

_DEFAULT_CONTEXT = 8192
_DEFAULT_MAX_RUNNING = 32
_DISABLED = "disabled"
_DEFAULT_TOTAL_TOKENS = 16384
_GEMMA4_ARCHS = ("Gemma4ForConditionalGeneration", "Gemma4ForCausalLM", "Gemma4UnifiedForConditionalGeneration")
# SGLang's --chunked-prefill-size when unset and the GPU memory is unknown (server_args.py 0.5.14 :3207;
# 4096 too for 35-60 GB GPUs such as L40S, :3171); -1 (or 0) turns chunking off.
_DEFAULT_CHUNKED_PREFILL = 4096


@dataclass(frozen=True)
class SchedulerSettings:
    """What the front resolved from the flags; plain data so it crosses the spawn boundary."""

    revision: str
    target: TinyConfig
    draft: TinyConfig | None
    speculative: bool
    num_steps: int
    topk: int
    num_draft_tokens: int
    eager_draft: bool
    disable_cuda_graph: bool
    attention_backend: str  # the decode side (--decode-attention-backend, else the one below)
    draft_attention_backend: str
    hybrid_swa: bool
    max_running_requests: int
    max_total_tokens: int
    context_length: int
    max_prefill_tokens: int
    cuda_graph_max_bs: int
    draft_agreement: float
    step_cost_ms: float
    device: str
    seed: int
    log_level: str = "info"
    decode_log_interval: int = 40
    chunked_prefill_size: int = _DEFAULT_CHUNKED_PREFILL
    radix_cache: bool = True  # SGLang's default; --disable-radix-cache turns it off
    hicache: bool = False
    hicache_ratio: float = 2.0
    # the release whose rules the model follows where releases differ (--sim-rules; harness.sim.release_rules)
    rules: ReleaseRules = DEFAULT_RULES
    hicache_size_gb: int = 0
    draft_cache: str = "post-fix"  # the HiCache load-back of the draft's view (harness.sim.radix_cache)
    # A labelled calibration lever, not SGLang (--sim-position-drop K:F): see FrozenKVMTPWorker.verify.
    position_drop: tuple[int, float] | None = None
    # What SGLang's settings hold as attention_backend after post-init (the flag, else Gemma-4's default), which
    # /server_info reports (harness.contract.facts RESOLVED_ATTENTION_KEYS).
    server_attention_backend: str = "triton"
    scheduler: str = "model"  # --sim-scheduler: the PyTorch model, or the torch-free stand-in (harness.sim.standin)


def chain_length(num_steps: int, topk: int, num_draft_tokens: int) -> int:
    """Draft tokens per branch: ``num_steps``, limited so that all branches fit ``num_draft_tokens - 1``."""
    return max(1, min(num_steps, (num_draft_tokens - 1) // topk))


class SettingsError(ValueError):
    """A launch the reference server cannot model (one line; the server exits 1 like a failed SGLang start)."""


def _speculative(args: argparse.Namespace, draft_arch: str | None) -> bool:
    algo = (args.speculative_algorithm or "NONE").upper()
    if algo == "NONE":
        return False
    if not args.speculative_draft_model_path:
        raise SettingsError(f"--speculative-algorithm {algo} needs --speculative-draft-model-path")
    if algo in ("NEXTN", "EAGLE"):
        if draft_arch != "Gemma4AssistantForCausalLM":
            raise SettingsError(f"{SIM_LABEL} models only Frozen-KV MTP drafts (Gemma4AssistantForCausalLM); "
                                f"the draft's architecture is {draft_arch}")
        logger.info("%s promoting --speculative-algorithm %s to FROZEN_KV_MTP (draft architecture %s)",
                    SIM_LABEL, algo, draft_arch)
        return True
    if algo == "FROZEN_KV_MTP":
        return True
    raise SettingsError(f"{SIM_LABEL} does not model --speculative-algorithm {algo}; "
                        "it models NEXTN/EAGLE promoted to FROZEN_KV_MTP, or FROZEN_KV_MTP")


def health_settings(environ: dict[str, str]) -> tuple[bool, float]:
    """(does /health generate, its timeout in s) from the environment, read as SGLang reads it
    (EnvBool; an int timeout); ValueError naming the variable for a value SGLang would reject."""
    raw = environ.get(HEALTH_GENERATION_ENV)
    generation = HEALTH_GENERATION_DEFAULT
    if raw is not None:
        if raw.lower() not in ENV_TRUE + ENV_FALSE:
            raise ValueError(f'{HEALTH_GENERATION_ENV}: "{raw}" is not a valid boolean value; valid: '
                             f"{', '.join(ENV_TRUE + ENV_FALSE)}")
        generation = raw.lower() in ENV_TRUE
    try:
        timeout = int(environ.get(HEALTH_CHECK_TIMEOUT_ENV, HEALTH_CHECK_TIMEOUT_S))
    except ValueError:
        raise ValueError(f"{HEALTH_CHECK_TIMEOUT_ENV}: expected an integer number of seconds") from None
    return generation, float(timeout)


def _check_draft_quantization(args: argparse.Namespace, draft: TinyConfig) -> None:
    # SGLang: unset, the draft takes the target's --quantization (server_args.py 2800 in 0.5.14, 3036 in 0.5.15);
    # a BF16 draft sent down ModelOpt's quantize path needs packages SGLang does not install.
    method = args.speculative_draft_model_quantization or args.quantization
    if method == DRAFT_QUANTIZATION_UNQUANT:
        method = None
    if method and method.startswith("modelopt") and draft.quantization is None:
        raise SettingsError(
            f"{SIM_LABEL} modelling SGLang: the draft {draft.name} is not quantized but its quantization resolved "
            f"to {method} (inherited from --quantization unless --speculative-draft-model-quantization is given); "
            "ModelOpt's quantize path needs packages SGLang does not install. Give "
            f"--speculative-draft-model-quantization {DRAFT_QUANTIZATION_UNQUANT} for a BF16 draft.")


def _cuda_graph_fully_disabled(args: argparse.Namespace) -> bool:
    """SGLang's ``cuda_graph_fully_disabled()``: both phases disabled; ``--disable-cuda-graph`` is the legacy
    switch below the explicit per-phase backends (server_args.py 0.5.14 :2942-2944)."""
    decode = args.cuda_graph_backend_decode or (_DISABLED if args.disable_cuda_graph else None)
    prefill = args.cuda_graph_backend_prefill or (_DISABLED if args.disable_cuda_graph else None)
    return decode == _DISABLED and prefill == _DISABLED


def _gpu_sm(args: argparse.Namespace) -> int | None:
    if args.sim_gpu_sm is not None:
        return int(args.sim_gpu_sm)
    if args.sim_device != "cuda":
        return None
    import torch

    return int(torch.cuda.get_device_capability()[0])


def _attention_backend(args: argparse.Namespace, target: TinyConfig) -> str:
    """``--attention-backend``, else SGLang's default: for Gemma-4 trtllm_mha on SM100 and triton elsewhere
    (harness.contract.facts GEMMA4_DEFAULT_ATTENTION_BACKEND, server_args.py 0.5.14 :4061-4069; 0.5.15
    arg_groups/overrides.py :609-616); the reference server's triton for any other model."""
    if args.attention_backend:
        return str(args.attention_backend)
    if target.architecture not in _GEMMA4_ARCHS:
        return "triton"
    default = "trtllm_mha" if _gpu_sm(args) == 10 else "triton"
    if not (args.prefill_attention_backend or args.decode_attention_backend):
        logger.info("%s Use %s as default attention backend for Gemma4", SIM_LABEL, default)
    return default


def resolve_settings(args: argparse.Namespace) -> SchedulerSettings:
    """Raise ``SettingsError`` (or ``ModelNotFoundError``) for what cannot start."""
    target = resolve_model(args.model_path)
    draft = resolve_model(args.speculative_draft_model_path) if args.speculative_draft_model_path else None
    speculative = _speculative(args, draft.architecture if draft else None)
    if args.quantization:
        target = type(target)(**{**target.__dict__, "quantization": args.quantization})
    if speculative and draft is not None:
        _check_draft_quantization(args, draft)
    num_steps = args.speculative_num_steps or 3
    topk = args.speculative_eagle_topk or 1
    num_draft_tokens = args.speculative_num_draft_tokens or (num_steps * topk + 1)
    server_backend = _attention_backend(args, target)
    backend = args.decode_attention_backend or server_backend
    draft_backend = args.speculative_draft_attention_backend or backend
    rules = rules_for(args.sim_rules)
    if speculative and topk > 1 and draft_backend not in rules.topk_backends:
        # SGLang raises this ValueError in the draft worker (frozen_kv_mtp_worker_v2.py 0.5.14 :246-251; from
        # 0.5.17 trtllm_mha is accepted too, 0.5.17 :241-245).
        raise SettingsError(f"Frozen-KV MTP topk > 1 currently supports only the {' and '.join(rules.topk_backends)} "
                            f"attention backend, got {draft_backend}.")
    if args.sim_device == "cuda":
        import torch  # only to check; the front does not otherwise need torch

        if not torch.cuda.is_available():
            raise SettingsError("--sim-device cuda: no CUDA device is available")
    max_running = args.max_running_requests or (FROZEN_KV_MTP_MAX_RUNNING_DEFAULT if speculative else _DEFAULT_MAX_RUNNING)
    context = args.context_length or _DEFAULT_CONTEXT
    total = args.max_total_tokens or max(_DEFAULT_TOTAL_TOKENS, 2 * context)
    hybrid_swa = target.has_sliding_window and not args.disable_hybrid_swa_memory
    if args.enable_hierarchical_cache and args.disable_radix_cache:
        # SGLang refuses the pair (server_args.py 0.5.14 _handle_cache_compatibility :5937-5941).
        raise SettingsError("--enable-hierarchical-cache needs the radix cache; drop --disable-radix-cache")
    if args.enable_hierarchical_cache:
        logger.info("%s HiCache: evicted prefixes kept on a host tier of %.1f x the KV pool and loaded back "
                    "on a hit (harness.sim.radix_cache)", SIM_LABEL, args.hicache_ratio)
    if args.tp_size > 1:
        logger.info("%s --tp-size %d accepted; the model runs one CPU process", SIM_LABEL, args.tp_size)
    return SchedulerSettings(
        revision=args.sim_revision, target=target, draft=draft if speculative else None, speculative=speculative,
        num_steps=num_steps, topk=topk, num_draft_tokens=num_draft_tokens,
        eager_draft=_cuda_graph_fully_disabled(args) or num_steps <= rules.eager_max_steps, rules=rules,
        disable_cuda_graph=bool(args.disable_cuda_graph), attention_backend=backend,
        draft_attention_backend=draft_backend, hybrid_swa=hybrid_swa,
        max_running_requests=max_running, max_total_tokens=total, context_length=context,
        max_prefill_tokens=max(args.max_prefill_tokens, 1), cuda_graph_max_bs=args.cuda_graph_max_bs or max_running,
        draft_agreement=args.sim_draft_agreement, step_cost_ms=args.sim_step_cost_ms, device=args.sim_device,
        seed=args.sim_seed if args.random_seed is None else args.random_seed, log_level=args.log_level,
        decode_log_interval=args.decode_log_interval,
        chunked_prefill_size=_DEFAULT_CHUNKED_PREFILL if args.chunked_prefill_size is None else args.chunked_prefill_size,
        radix_cache=not args.disable_radix_cache, hicache=bool(args.enable_hierarchical_cache),
        hicache_ratio=float(args.hicache_ratio), hicache_size_gb=args.hicache_size, draft_cache=args.sim_draft_cache,
        position_drop=parse_position_drop(args.sim_position_drop) if args.sim_position_drop else None,
        server_attention_backend=server_backend, scheduler=args.sim_scheduler,
    )
