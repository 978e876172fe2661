"""A tiny random ``LlamaForCausalLM`` and its BPE tokenizer, made on the spot (no download), for the CPU build.

The real-SGLang CPU build serves a model that must be small enough to load and warm up in seconds on two
cores, yet be a real architecture SGLang loads with its own model code. The weights are written with numpy
in the safetensors format (no torch, no transformers needed in the harness's interpreter) and the tokenizer is
a byte-level BPE trained here with ``tokenizers``, saved for transformers' ``PreTrainedTokenizerFast``.

The weights are drawn wider than a trained model's (std :data:`INIT_STD`) so the next-token distribution is
peaked: greedy tokens then do not flip between two kernels' rounding (the plain and the speculative server
must agree token for token).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from harness.util.atomic import write_atomic, write_atomic_bytes
from harness.util.bounded_read import read_bytes, read_text

__all__ = ["HIDDEN", "INIT_STD", "LAYERS", "make_tiny_eagle_draft", "make_tiny_llama"]

HIDDEN = 64
LAYERS = 2
HEADS = 4
KV_HEADS = 2
INTERMEDIATE = 128
MAX_POSITIONS = 4096
INIT_STD = 0.5
_VOCAB_TARGET = 512
_SPECIALS = ("<unk>", "<s>", "</s>")  # ids 0, 1, 2: unk, bos, eos as Llama numbers them

# A fixed corpus: common English words, digits and punctuation, enough for a few hundred merges.
_WORDS = (  # noqa: SIM905 - read as prose, kept as prose
    "the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches and "
    "every server answers requests with tokens from its scheduler cache memory pool radix tree prefix "
    "decode prefill batch draft verify accept length speculative greedy sample temperature top logits "
    "one two three four five six seven eight nine ten hundred thousand million first second third last "
    "hello world model output input prompt question answer because therefore however moreover finally"
).split()


def _corpus(seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(2000):
        words = rng.choice(_WORDS, size=int(rng.integers(4, 16)))
        number = int(rng.integers(0, 100_000))
        lines.append(" ".join(str(w) for w in words) + f" {number}" + str(rng.choice([".", ",", "?", "!", ";"])))
    return lines


def _train_tokenizer(dest: Path, seed: int) -> int:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=_VOCAB_TARGET, special_tokens=list(_SPECIALS), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(_corpus(seed), trainer=trainer)
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                             special_tokens=[("<s>", 1)])
    tokenizer.save(str(dest / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "add_bos_token": True,
        "model_max_length": MAX_POSITIONS,
        "clean_up_tokenization_spaces": False,
    }
    write_atomic(dest / "tokenizer_config.json", json.dumps(config, indent=2) + "\n")
    special = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
    write_atomic(dest / "special_tokens_map.json", json.dumps(special, indent=2) + "\n")
    return int(tokenizer.get_vocab_size())


def _write_safetensors(path: Path, tensors: Mapping[str, np.ndarray]) -> None:
    """The safetensors format: an 8-byte little-endian header size, a JSON header, then the raw data."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    blobs = []
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the data starts 8-byte aligned
    with path.open("wb") as out:
        out.write(struct.pack("<Q", len(encoded)))
        out.write(encoded)
        for blob in blobs:
            out.write(blob)


def _weights(vocab: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    head_dim = HIDDEN // HEADS

    def normal(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * INIT_STD).astype(np.float32)

    tensors = {"model.embed_tokens.weight": normal(vocab, HIDDEN)}
    for layer in range(LAYERS):
        prefix = f"model.layers.{layer}"
        tensors.update({
            f"{prefix}.self_attn.q_proj.weight": normal(HEADS * head_dim, HIDDEN),
            f"{prefix}.self_attn.k_proj.weight": normal(KV_HEADS * head_dim, HIDDEN),
            f"{prefix}.self_attn.v_proj.weight": normal(KV_HEADS * head_dim, HIDDEN),
            f"{prefix}.self_attn.o_proj.weight": normal(HIDDEN, HEADS * head_dim),
            f"{prefix}.mlp.gate_proj.weight": normal(INTERMEDIATE, HIDDEN),
            f"{prefix}.mlp.up_proj.weight": normal(INTERMEDIATE, HIDDEN),
            f"{prefix}.mlp.down_proj.weight": normal(HIDDEN, INTERMEDIATE),
            f"{prefix}.input_layernorm.weight": np.ones(HIDDEN, dtype=np.float32),
            f"{prefix}.post_attention_layernorm.weight": np.ones(HIDDEN, dtype=np.float32),
        })  # fmt: skip
    tensors["model.norm.weight"] = np.ones(HIDDEN, dtype=np.float32)
    tensors["lm_head.weight"] = normal(vocab, HIDDEN)
    return tensors


def make_tiny_llama(dest: Path, *, seed: int = 0) -> Path:
    """Write a random 2-layer, hidden-64 ``LlamaForCausalLM`` with a BPE tokenizer to ``dest``; return ``dest``.

    Deterministic in ``seed``: the same seed gives the same tokenizer and the same weights, byte for byte.
    """
    dest.mkdir(parents=True, exist_ok=True)
    vocab = _train_tokenizer(dest, seed)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HIDDEN // HEADS,
        "hidden_act": "silu",
        "max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": "float32",
    }
    write_atomic(dest / "config.json", json.dumps(config, indent=2) + "\n")
    generation = {"bos_token_id": 1, "eos_token_id": 2}
    write_atomic(dest / "generation_config.json", json.dumps(generation, indent=2) + "\n")
    _write_safetensors(dest / "model.safetensors", _weights(vocab, np.random.default_rng(seed)))
    return dest


def _read_safetensors(path: Path) -> dict[str, np.ndarray]:
    data = read_bytes(path, "model")
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    base = 8 + size
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        out[name] = np.frombuffer(data[base + start : base + end], dtype="<f4").reshape(info["shape"])
    return out


def make_tiny_eagle_draft(dest: Path, target: Path, *, seed: int = 1) -> Path:
    """Write a random one-layer EAGLE draft (``LlamaForCausalLMEagle``) for the tiny Llama at ``target``.

    SGLang's EAGLE draft (0.5.21 ``srt/models/llama_eagle.py``) feeds ``fc(concat(embedding, target hidden))``
    through one decoder layer whose input norm is skipped, and shares the target's embedding and LM head; the
    checkpoint's names carry no ``model.`` prefix (its ``load_weights`` adds it). The tokenizer is the target's.
    """
    dest.mkdir(parents=True, exist_ok=True)
    config = json.loads(read_text(target / "config.json", "config"))
    config.update({"architectures": ["LlamaForCausalLMEagle"], "num_hidden_layers": 1})
    write_atomic(dest / "config.json", json.dumps(config, indent=2) + "\n")
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"):
        write_atomic_bytes(dest / name, read_bytes(target / name, "model"))
    rng = np.random.default_rng(seed)
    target_weights = _read_safetensors(target / "model.safetensors")
    layer = {name.removeprefix("model.layers.0."): array for name, array in _weights(config["vocab_size"], rng).items()
             if name.startswith("model.layers.0.") and "input_layernorm" not in name}
    tensors = {
        "embed_tokens.weight": target_weights["model.embed_tokens.weight"],
        "fc.weight": (rng.standard_normal((HIDDEN, 2 * HIDDEN)) * INIT_STD).astype(np.float32),
        "fc.bias": np.zeros(HIDDEN, dtype=np.float32),
        **{f"layers.0.{name}": array for name, array in layer.items()},
        "lm_head.weight": target_weights["lm_head.weight"],
    }
    _write_safetensors(dest / "model.safetensors", tensors)
    return dest

