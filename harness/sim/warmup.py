"""SGLang's own warm-up request, as the reference server models it (``_execute_server_warmup``).

After the HTTP port opens and before the ready line, SGLang sends itself one request with
``max_new_tokens`` 8 (so it decodes, and a speculative server drafts): for a model with image
understanding a chat request with one 32x32 image and "Describe the image.", otherwise ``/generate``
with "The capital city of France is" (``harness.sim.sglang_words``, cited there). ``--skip-server-warmup``
skips it. The reference server runs the same request through its scheduler: at revision pre-fix on the
eager draft path it crashes there, before the ready line, with N = this prompt's length.

The prompt is built with the reference server's byte tokenizer; the image stands for as many
placeholder tokens as Gemma-4's image processor makes of SGLang's PNG. The length is a model of
the real one (whose chat template tokens depend on Gemma-4's tokenizer), not a measurement of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.sim.model_config import TinyConfig
from harness.sim.sglang_words import (
    GENERATE_PATH,
    WARMUP_CHAT_PATH,
    WARMUP_IMAGE_PROMPT,
    WARMUP_IMAGE_SOFT_TOKENS_GEMMA4,
    WARMUP_MAX_NEW_TOKENS,
    WARMUP_TEXT,
)
from harness.sim.tokenizer import BOS_ID, PAD_ID, ByteTokenizer

__all__ = ["WarmupRequest", "warmup_request"]


@dataclass(frozen=True)
class WarmupRequest:
    """The request SGLang would send itself: where, what kind, the prompt's token ids, and how many to generate."""

    path: str
    kind: str  # "chat-with-image" | "text"
    input_ids: tuple[int, ...]
    max_new_tokens: int = WARMUP_MAX_NEW_TOKENS


def warmup_request(target: TinyConfig) -> WarmupRequest:
    tokenizer = ByteTokenizer()
    if target.has_vision:
        ids = [BOS_ID, *tokenizer.encode("user\n"), *[PAD_ID] * WARMUP_IMAGE_SOFT_TOKENS_GEMMA4,
               *tokenizer.encode(f"{WARMUP_IMAGE_PROMPT}\nmodel\n")]
        return WarmupRequest(WARMUP_CHAT_PATH, "chat-with-image", tuple(ids))
    return WarmupRequest(GENERATE_PATH, "text", (BOS_ID, *tokenizer.encode(WARMUP_TEXT)))
