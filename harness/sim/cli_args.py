"""The reference server's launch flags: SGLang's names (as its ``ServerArgs.add_cli_args``) plus ``--sim-*`` knobs.

Flags the model does not act on are still accepted, so a scenario written for real SGLang parses
unchanged; an unknown flag exits 2 with argparse's message, as SGLang's own parser does.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import Any

from harness.sim import DEFAULT_REVISION, DEFAULT_SCHEDULER, REVISIONS, SCHEDULER_ENV, SCHEDULERS
from harness.sim.release_rules import rules_for

__all__ = ["build_parser", "parse_position_drop", "parse_server_args", "ATTENTION_BACKENDS", "SPECULATIVE_ALGORITHMS"]

ATTENTION_BACKENDS = (
    "triton", "trtllm_mha", "trtllm_mla", "flashinfer", "fa3", "fa4", "flashmla", "cutlass_mla",
    "torch_native", "flex_attention", "aiter", "wave", "intel_amx", "ascend", "dual_chunk_flash_attn", "nsa",
)
# SGLang's parser does not check this value (validated later); the model validates it on start.
SPECULATIVE_ALGORITHMS = (
    "DFLASH", "UNO", "DSPARK", "EAGLE", "EAGLE3", "FROZEN_KV_MTP", "STANDALONE", "NGRAM", "NONE", "NEXTN",
)


def _add_model_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model-path", "--model", dest="model_path", required=True)
    p.add_argument("--tokenizer-path", default=None)
    p.add_argument("--tokenizer-mode", default="auto")
    p.add_argument("--skip-tokenizer-init", action="store_true")
    p.add_argument("--load-format", default="auto")
    p.add_argument("--model-loader-extra-config", default="{}")
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--context-length", type=int, default=None)
    p.add_argument("--is-embedding", action="store_true")
    p.add_argument("--revision", default=None)
    p.add_argument("--model-impl", default="auto")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--kv-cache-dtype", default="auto")
    p.add_argument("--quantization", default=None)
    p.add_argument("--quantization-param-path", default=None)
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--chat-template", default=None)
    p.add_argument("--json-model-override-args", default="{}")
    p.add_argument("--download-dir", default=None)
    p.add_argument("--device", default=None)


def _add_runtime_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--mem-fraction-static", type=float, default=None)
    p.add_argument("--max-running-requests", type=int, default=None)
    p.add_argument("--max-queued-requests", type=int, default=None)
    p.add_argument("--max-total-tokens", type=int, default=None)
    p.add_argument("--chunked-prefill-size", type=int, default=None)
    p.add_argument("--max-prefill-tokens", type=int, default=16384)
    p.add_argument("--schedule-policy", default="fcfs")
    p.add_argument("--schedule-conservativeness", type=float, default=1.0)
    p.add_argument("--page-size", type=int, default=1)
    p.add_argument("--tp-size", "--tensor-parallel-size", "--tp", dest="tp_size", type=int, default=1)
    p.add_argument("--dp-size", "--data-parallel-size", dest="dp_size", type=int, default=1)
    p.add_argument("--pp-size", "--pipeline-parallel-size", dest="pp_size", type=int, default=1)
    p.add_argument("--ep-size", "--expert-parallel-size", dest="ep_size", type=int, default=1)
    p.add_argument("--base-gpu-id", type=int, default=0)
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--dist-init-addr", default=None)
    p.add_argument("--random-seed", type=int, default=None)
    p.add_argument("--stream-interval", type=int, default=1)
    p.add_argument("--watchdog-timeout", type=float, default=300)
    p.add_argument("--skip-server-warmup", action="store_true")
    p.add_argument("--warmups", default=None)
    p.add_argument("--allow-auto-truncate", action="store_true")
    p.add_argument("--api-key", default=None)
    p.add_argument("--reasoning-parser", default=None)
    p.add_argument("--tool-call-parser", default=None)
    p.add_argument("--disable-overlap-schedule", action="store_true")
    p.add_argument("--enable-mixed-chunk", action="store_true")
    p.add_argument("--disable-radix-cache", action="store_true")
    p.add_argument("--disable-custom-all-reduce", action="store_true")
    p.add_argument("--enable-torch-compile", action="store_true")
    p.add_argument("--enable-dp-attention", action="store_true")


def _add_logging_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--log-level", default="info")
    p.add_argument("--log-level-http", default=None)
    p.add_argument("--log-requests", action="store_true")
    p.add_argument("--log-requests-level", type=int, default=2)
    p.add_argument("--enable-metrics", action="store_true")
    p.add_argument("--enable-cache-report", action="store_true")
    p.add_argument("--show-time-cost", action="store_true")
    p.add_argument("--decode-log-interval", type=int, default=40)


def _add_kernel_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--attention-backend", choices=ATTENTION_BACKENDS, default=None)
    p.add_argument("--decode-attention-backend", choices=ATTENTION_BACKENDS, default=None)
    p.add_argument("--prefill-attention-backend", choices=ATTENTION_BACKENDS, default=None)
    p.add_argument("--mm-attention-backend", default=None)
    p.add_argument("--sampling-backend", default=None)
    p.add_argument("--grammar-backend", default=None)
    p.add_argument("--disable-cuda-graph", action="store_true")
    p.add_argument("--disable-cuda-graph-padding", action="store_true")
    p.add_argument("--cuda-graph-max-bs", type=int, default=None)
    p.add_argument("--cuda-graph-bs", type=int, nargs="+", default=None)
    p.add_argument("--cuda-graph-backend-decode", default=None)
    p.add_argument("--cuda-graph-backend-prefill", default=None)


def _add_speculative_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--speculative-algorithm", type=str, default=None)
    p.add_argument("--speculative-draft-model-path", "--speculative-draft-model", dest="speculative_draft_model_path")
    p.add_argument("--speculative-draft-model-revision", default=None)
    p.add_argument("--speculative-draft-model-quantization", default=None)
    p.add_argument("--speculative-draft-load-format", default=None)
    p.add_argument("--speculative-num-steps", type=int, default=None)
    p.add_argument("--speculative-eagle-topk", type=int, default=None)
    p.add_argument("--speculative-num-draft-tokens", type=int, default=None)
    p.add_argument("--speculative-accept-threshold-single", type=float, default=1.0)
    p.add_argument("--speculative-accept-threshold-acc", type=float, default=1.0)
    p.add_argument("--speculative-token-map", default=None)
    p.add_argument("--speculative-attention-mode", default="prefill")
    p.add_argument("--speculative-draft-attention-backend", default=None)


def _add_memory_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--enable-hierarchical-cache", action="store_true")
    p.add_argument("--hicache-ratio", type=float, default=2.0)
    p.add_argument("--hicache-size", type=int, default=0)
    p.add_argument("--hicache-write-policy", default="write_through")
    p.add_argument("--hicache-io-backend", default="kernel")
    p.add_argument("--hicache-mem-layout", default="layer_first")
    p.add_argument("--hicache-storage-backend", default=None)
    p.add_argument("--hicache-storage-prefetch-policy", default="best_effort")
    p.add_argument("--swa-full-tokens-ratio", type=float, default=0.8)
    p.add_argument("--disable-hybrid-swa-memory", action="store_true")


# The knobs a build spec may set (``sim:post-fix,step-cost-ms=20`` -> ``--sim-step-cost-ms 20``), declared as
# data so that the build layer reads their names here instead of from argparse's internals.
SIM_KNOBS: dict[str, dict[str, Any]] = {
    "draft-agreement": {"type": float, "default": 0.8,
                        "help": "0..1: weight of the target's own view in the draft's logits; acceptance emerges from it"},
    "step-cost-ms": {"type": float, "default": 0.0,
                     "help": "extra time per target forward step (a draft step costs a tenth), modelling GPU time"},
    "device": {"choices": ("cpu", "cuda"), "default": "cpu"},
    # The second modelled bug, with revisions of its own: HiCache's load-back restores the target's KV and, at
    # post-fix, the draft's view of those tokens too (sglang#32176; PRs #27953, #17338, #30393).
    "draft-cache": {"choices": ("pre-fix", "post-fix"), "default": "post-fix",
                    "help": "pre-fix: a HiCache load-back leaves the draft's view of the reloaded prefix stale"},
    "seed": {"type": int, "default": 0},
    # Where SGLang's releases differ (the eager rule, topk > 1 backends, trtllm_mha's graph-path SWA refill):
    # follow this release's (harness.sim.release_rules); unset: 0.5.14's and 0.5.15's, as before.
    "rules": {"default": None, "metavar": "VERSION",
              "help": "follow this sglang release's rules where releases differ (e.g. 0.5.23: a one-step draft is "
                      "captured, not eager); unset: 0.5.14's"},
    # Not an SGLang behaviour: a labelled lever for calibrating baseline checks per draft position
    # (benchmarks/bench_baselines.py). K:F cuts a fraction F of the verify steps that would accept position K.
    "position-drop": {"default": None, "metavar": "K:F",
                      "help": "model a drafter that loses a fraction F of its acceptance at draft position K "
                              "(and so at every later one): K:F, e.g. 2:0.1"},
    # Not an SGLang behaviour: which scheduler child computes the tokens (harness.sim.standin: torch-free,
    # deterministic, the same HTTP and log contract; for tests whose claim is about search logic).
    "scheduler": {"choices": SCHEDULERS, "default": None,
                  "help": "model: the tiny PyTorch model; standin: the torch-free stand-in of the reference server; "
                          f"unset: ${SCHEDULER_ENV} if set, else {DEFAULT_SCHEDULER}"},
    "gpu-sm": {"type": int, "default": None,
               "help": "compute capability major of the GPU the model stands for (10: SM100, B200), for SGLang's "
                       "hardware-dependent defaults (Gemma-4's attention backend); unset: the --sim-device's own"},
}


def _add_sim_knobs(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("reference-server knobs (sglang-repro's model only; not SGLang flags)")
    g.add_argument("--sim-revision", choices=REVISIONS, default=DEFAULT_REVISION,
                   help="which side of the upstream fix (sglang PR #29616) to model")
    for name, kwargs in SIM_KNOBS.items():
        g.add_argument(f"--sim-{name}", **kwargs)


def build_parser() -> argparse.ArgumentParser:
    """SGLang's flag names plus the reference server's ``--sim-*`` knobs; unknown flags exit 2."""
    p = argparse.ArgumentParser(
        prog="python -m harness.sim.server",
        description="sglang-repro's CPU reference server: a model of SGLang's Frozen-KV MTP mechanism (not SGLang).",
    )
    for add in (_add_model_flags, _add_runtime_flags, _add_logging_flags, _add_kernel_flags,
                _add_speculative_flags, _add_memory_flags, _add_sim_knobs):
        add(p)
    return p


def parse_server_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse and check the values argparse cannot; bad values exit 2 like argparse errors."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not 0.0 <= args.sim_draft_agreement <= 1.0:
        parser.error(f"--sim-draft-agreement must be within [0, 1], got {args.sim_draft_agreement}")
    try:
        rules_for(args.sim_rules)
    except ValueError as exc:
        parser.error(str(exc))
    if args.sim_position_drop is not None and parse_position_drop(args.sim_position_drop) is None:
        parser.error(f"--sim-position-drop must be K:F with K >= 1 and F within [0, 1], got {args.sim_position_drop!r}")
    if args.sim_scheduler is None:
        args.sim_scheduler = os.environ.get(SCHEDULER_ENV) or DEFAULT_SCHEDULER
        if args.sim_scheduler not in SCHEDULERS:
            parser.error(f"${SCHEDULER_ENV}={args.sim_scheduler!r}: valid values are {', '.join(SCHEDULERS)}")
    if args.sim_step_cost_ms < 0:
        parser.error(f"--sim-step-cost-ms must be >= 0, got {args.sim_step_cost_ms}")
    if args.speculative_algorithm is not None and args.speculative_algorithm.upper() not in SPECULATIVE_ALGORITHMS:
        parser.error(f"--speculative-algorithm {args.speculative_algorithm!r}: valid values are "
                     + ", ".join(SPECULATIVE_ALGORITHMS))
    for name in ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    return args


def parse_position_drop(text: str) -> tuple[int, float] | None:
    """``K:F`` as (K, F), or None when it is not one (K >= 1, 0 <= F <= 1)."""
    k, sep, f = text.partition(":")
    try:
        position, fraction = int(k), float(f)
    except ValueError:
        return None
    return (position, fraction) if sep and position >= 1 and 0.0 <= fraction <= 1.0 else None
