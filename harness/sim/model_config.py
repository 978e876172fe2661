"""Tiny model architectures standing in for the checkpoints the scenarios name.

Known hub ids map to tiny configurations with the traits that matter to the bugs (Gemma-4:
interleaved sliding-window and full attention layers; assistant drafts are
``Gemma4AssistantForCausalLM``). A local folder with ``config.json`` is read for its
architecture and layer pattern, with sizes capped to tiny ones. Anything else is an error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TinyConfig", "ModelNotFoundError", "resolve_model", "KNOWN_MODELS", "VOCAB_SIZE", "ASSISTANT_ARCH"]

# Matches the byte tokenizer (256 bytes + 4 specials); any input id is reduced modulo this.
VOCAB_SIZE = 260
ASSISTANT_ARCH = "Gemma4AssistantForCausalLM"
_CAP_HIDDEN, _CAP_LAYERS, _CAP_HEADS = 64, 8, 4


class ModelNotFoundError(ValueError):
    """The model path is neither a known id nor a local folder with config.json."""


@dataclass(frozen=True)
class TinyConfig:
    """What the tiny model is built from; ``layer_types`` holds "sliding_attention" or "full_attention"."""

    name: str
    architecture: str
    model_type: str
    hidden_size: int
    num_attention_heads: int
    head_dim: int
    intermediate_size: int
    layer_types: tuple[str, ...]
    sliding_window: int
    context_length: int
    vocab_size: int = VOCAB_SIZE
    quantization: str | None = None
    # SGLang's has_image_understanding: the checkpoint's config has a vision_config
    # (srt/configs/model_config.py, harness.contract.facts.WARMUP_CHAT_PATH); decides the kind of warm-up.
    has_vision: bool = False

    @property
    def num_layers(self) -> int:
        return len(self.layer_types)

    @property
    def has_sliding_window(self) -> bool:
        return "sliding_attention" in self.layer_types

    @property
    def is_assistant(self) -> bool:
        return self.architecture == ASSISTANT_ARCH


def _gemma4_layers(n: int, every: int) -> tuple[str, ...]:
    # Gemma-4 interleaves several sliding-window layers with one full-attention layer.
    return tuple("full_attention" if (i + 1) % every == 0 else "sliding_attention" for i in range(n))


# Gemma-4 31B / E4B -it checkpoints are multimodal (Gemma4ForConditionalGeneration with a vision_config).
_31B = dict(architecture="Gemma4ForConditionalGeneration", model_type="gemma4", has_vision=True, hidden_size=64,
            num_attention_heads=2, head_dim=16, intermediate_size=128, layer_types=_gemma4_layers(6, 6),
            sliding_window=64, context_length=262144)
_E4B = dict(_31B, layer_types=_gemma4_layers(4, 4), context_length=131072)
_ASSISTANT = dict(architecture=ASSISTANT_ARCH, model_type="gemma4_assistant", has_vision=False, hidden_size=64,
                  num_attention_heads=2, head_dim=16, intermediate_size=128,
                  layer_types=("full_attention",), sliding_window=64, context_length=262144)

KNOWN_MODELS: dict[str, dict] = {
    "google/gemma-4-31b-it": _31B,
    "google/gemma-4-e4b-it": _E4B,
    "nvidia/gemma-4-31b-it-nvfp4": dict(_31B, quantization="modelopt_fp4"),
    "google/gemma-4-31b-it-assistant": _ASSISTANT,
    "google/gemma-4-e4b-it-assistant": _ASSISTANT,
    "nvidia/gemma-4-31b-it-nvfp4-assistant": _ASSISTANT,
}


def _from_folder(folder: Path) -> TinyConfig:
    path = folder / "config.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelNotFoundError(f"{path}: cannot read model config: {exc}") from None
    text = raw.get("text_config", raw) if isinstance(raw.get("text_config"), dict) else raw
    archs = raw.get("architectures") or ["UnknownForCausalLM"]
    hidden = min(int(text.get("hidden_size", _CAP_HIDDEN)), _CAP_HIDDEN)
    heads = max(1, min(int(text.get("num_attention_heads", 2)), _CAP_HEADS))
    n_layers = max(1, min(int(text.get("num_hidden_layers", 4)), _CAP_LAYERS))
    layer_types = text.get("layer_types")
    if isinstance(layer_types, list) and layer_types:
        layer_types = tuple(str(t) for t in layer_types[:n_layers])
    else:
        layer_types = ("full_attention",) * n_layers
    return TinyConfig(
        name=str(folder), architecture=str(archs[0]), model_type=str(raw.get("model_type", "unknown")),
        hidden_size=hidden, num_attention_heads=heads, head_dim=max(4, hidden // heads),
        intermediate_size=2 * hidden, layer_types=layer_types,
        sliding_window=max(1, min(int(text.get("sliding_window") or 64), 64)),
        context_length=int(text.get("max_position_embeddings", 8192)),
        quantization=(raw.get("quantization_config") or {}).get("quant_method"),
        has_vision=isinstance(raw.get("vision_config"), dict),
    )


def resolve_model(path: str) -> TinyConfig:
    """A known id (case-insensitive) or a local folder with config.json; otherwise ``ModelNotFoundError``."""
    folder = Path(path).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            raise ModelNotFoundError(f"{path}: local model folder has no config.json")
        return _from_folder(folder)
    known = KNOWN_MODELS.get(path.strip().lower())
    if known is None:
        raise ModelNotFoundError(
            f"{path}: unknown model for the reference server; known ids: {', '.join(sorted(KNOWN_MODELS))} "
            "(case-insensitive), or a local folder with config.json"
        )
    return TinyConfig(name=path, **known)
