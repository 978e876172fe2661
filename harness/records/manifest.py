"""What a workload was, so two results are compared only when they measured the same thing.

A :class:`Manifest` is written into every ``requests.jsonl`` (its first line) and belongs in every result:
the arrival model (open loop: Poisson arrivals at a finite ``request_rate``, capped by ``concurrency``; closed
loop: unlimited rate, ``concurrency`` requests always in flight), the sampling parameters, ``ignore_eos``,
streaming, the prompt lengths, and who counted the output tokens. Throughput under a closed loop of 4 and an
open loop at 2 req/s are different quantities; so are runs that stop at EOS and runs that do not.

:func:`manifest_mismatch` is the one rule for "comparable": every field in :data:`COMPARED_FIELDS` must be
equal. The prompt content digest is kept for people reading results but not compared (two seeds of the same
length distribution are the same experiment).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

__all__ = ["COMPARED_FIELDS", "Manifest", "PromptLengths", "build_manifest", "manifest_mismatch"]

# Who counts output tokens: the server's cumulative `meta_info.completion_tokens` on each streamed event
# (sglang srt/managers/tokenizer_manager.py `_handle_batch_output`: 0.5.14:1890, 0.5.15:1918), never a
# client-side re-tokenization of the text.
TOKEN_COUNTER = "server:meta_info.completion_tokens"


@dataclass(frozen=True)
class PromptLengths:
    """The measured prompts' token counts, summarised; ``sha256`` covers the exact sequence of lengths."""

    count: int
    min: int
    max: int
    mean: float
    sha256: str

    @classmethod
    def of(cls, lengths: Sequence[int]) -> PromptLengths:
        xs = list(lengths)
        digest = hashlib.sha256(",".join(str(x) for x in xs).encode()).hexdigest()[:16]
        return cls(count=len(xs), min=min(xs, default=0), max=max(xs, default=0),
                   mean=round(sum(xs) / len(xs), 3) if xs else 0.0, sha256=digest)


@dataclass(frozen=True)
class Manifest:
    loop: str  # "open" | "closed"
    request_rate: float | None  # requests/s of the Poisson arrivals; None: unlimited (closed loop)
    concurrency: int
    requests: int  # measured requests
    warmup: int
    max_new_tokens: int
    temperature: float
    ignore_eos: bool
    stream: bool
    prompt_lengths: PromptLengths
    token_counter: str = TOKEN_COUNTER
    endpoint: str = "/generate"
    prompts_sha256: str = ""  # the prompts' content; informational, not compared

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Manifest:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        pl = values.get("prompt_lengths")
        values["prompt_lengths"] = PromptLengths(**pl) if isinstance(pl, Mapping) else PromptLengths.of(())
        return cls(**values)


COMPARED_FIELDS = ("loop", "request_rate", "concurrency", "requests", "warmup", "max_new_tokens", "temperature",
                   "ignore_eos", "stream", "prompt_lengths", "token_counter", "endpoint")


def build_manifest(
    *, prompt_tokens: Sequence[int], prompt_digest: str, warmup: int, concurrency: int, request_rate: float | None,
    max_new_tokens: int, temperature: float, ignore_eos: bool, stream: bool,
) -> Manifest:
    """The manifest of a workload; ``prompt_tokens`` are the measured prompts' lengths (warm-up left out)."""
    rate = None if request_rate is None or math.isinf(request_rate) else float(request_rate)
    return Manifest(
        loop="closed" if rate is None else "open", request_rate=rate, concurrency=concurrency,
        requests=len(prompt_tokens), warmup=warmup, max_new_tokens=max_new_tokens, temperature=float(temperature),
        ignore_eos=ignore_eos, stream=stream, prompt_lengths=PromptLengths.of(prompt_tokens),
        prompts_sha256=prompt_digest,
    )


def _show(value: Any) -> str:
    if isinstance(value, PromptLengths):
        return f"{value.count} prompts of {value.min}-{value.max} tokens (mean {value.mean:g}, {value.sha256})"
    if value is None:
        return "unlimited"
    return json.dumps(value)


def manifest_mismatch(a: Manifest | None, b: Manifest | None) -> str | None:
    """One line naming the first field in which two manifests differ, or None when they may be compared.

    A result without a manifest (written before manifests existed) is not refused: there is nothing to
    compare, and the caller may say so."""
    if a is None or b is None:
        return None
    for name in COMPARED_FIELDS:
        va, vb = getattr(a, name), getattr(b, name)
        if va != vb:
            return f"workload manifests differ in {name}: {_show(va)} vs {_show(vb)}"
    return None
