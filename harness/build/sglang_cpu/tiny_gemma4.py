"""A tiny random Gemma-4 target and its ``Gemma4AssistantForCausalLM`` draft, made on the spot (no download).

The seed's bug (frozen-KV MTP, issue 51) needs a Gemma-4 text target and a Gemma-4 assistant whose layers read
the target's KV cache. Both are built with transformers' own classes (so Hugging Face loads them back for the
greedy reference) and saved with a BPE tokenizer trained here. This file imports nothing from the harness: it runs
in the real-SGLang environment's interpreter (``python tiny_gemma4.py DEST``), which has transformers.

What SGLang needs beyond transformers' defaults (0.5.14/0.5.15 read these):
- a text-only ``gemma4_text`` target gets the ``swa_*`` keys written out: SGLang derives them only for
  ``gemma4``/``gemma4_assistant`` (``srt/utils/hf_transformers/config.py:156-180``) and the hybrid SWA KV pool
  reads them (``srt/model_executor/model_runner_kv_cache_mixin.py:700``);
- ``moe_intermediate_size`` must be an int: a null one fails CPU tp alignment (``srt/configs/update_config.py:155``,
  ``None % n``), even with the MoE block off;
- head_dim == global_head_dim and one KV head count, so SGLang's swap of base/``global_*`` attributes and
  Hugging Face's own reading agree on every layer;
- the draft's layer types are the target's last two (sliding, full): SGLang maps each assistant layer onto the
  target's last layer of the same type (``srt/models/gemma4_mtp.py:177``, ``build_frozen_kv_mtp_context``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["HIDDEN", "LAYER_TYPES", "SLIDING_WINDOW", "VOCAB", "make_tiny_gemma4", "main"]

HIDDEN = 64
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 16
LAYER_TYPES = ("sliding_attention", "full_attention")
SLIDING_WINDOW = 512
VOCAB = 512  # the tokenizer's size; the models' embedding tables have exactly this many rows
_SPECIALS = ("<pad>", "<eos>", "<bos>", "<unk>")  # ids 0..3: Gemma's pad 0, eos 1, bos 2

# Enough varied text for a BPE of VOCAB entries: word pieces, digits, punctuation.
_CORPUS_WORDS = (
    "the quick brown fox jumps over a lazy dog while seven wizards quietly box jolly gnomes "
    "speculative decoding drafts tokens that the target model verifies in one forward pass "
    "a sliding window attends to the last five hundred twelve positions and a full layer to all "
    "servers schedule requests batch them and stream tokens back to clients over http "
    "memory pools hold keys and values per layer for every token of every request in flight "
    "0 1 2 3 4 5 6 7 8 9 10 42 276 512 1024 , . ; : ! ? ( ) [ ] { } - + = * / # @ % & "
)


def _text_config_kwargs(num_layers: int, layer_types: list[str], *, kv_shared: int) -> dict[str, Any]:
    return {
        "vocab_size": VOCAB,
        "hidden_size": HIDDEN,
        "intermediate_size": 2 * HIDDEN,
        "num_hidden_layers": num_layers,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "global_head_dim": HEAD_DIM,
        "num_global_key_value_heads": KV_HEADS,
        "layer_types": layer_types,
        "sliding_window": SLIDING_WINDOW,
        "max_position_embeddings": 4096,
        "hidden_size_per_layer_input": 0,
        "vocab_size_per_layer_input": 0,
        "num_kv_shared_layers": kv_shared,
        "enable_moe_block": False,
        "moe_intermediate_size": 2 * HIDDEN,
        "final_logit_softcapping": 30.0,
        "pad_token_id": 0,
        "eos_token_id": 1,
        "bos_token_id": 2,
        "tie_word_embeddings": True,
        "dtype": "float32",
    }


def _swa_keys() -> dict[str, Any]:
    return {"swa_head_dim": HEAD_DIM, "swa_v_head_dim": HEAD_DIM, "swa_num_key_value_heads": KV_HEADS,
            "v_head_dim": HEAD_DIM}  # fmt: skip


def _save_tokenizer(dest: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    from tokenizers import decoders

    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=list(_SPECIALS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)  # fmt: skip
    tokenizer.train_from_iterator([_CORPUS_WORDS] * 50, trainer=trainer)
    if tokenizer.get_vocab_size() > VOCAB:
        raise RuntimeError(f"tokenizer has {tokenizer.get_vocab_size()} entries, more than the model's {VOCAB}")
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", eos_token="<eos>",
                                   bos_token="<bos>", unk_token="<unk>")  # fmt: skip
    fast.save_pretrained(str(dest))


def _patch_config(path: Path, updates: dict[str, Any], *, text_key: str | None = None) -> None:
    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    target = config[text_key] if text_key else config
    target.update(updates)
    (path / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def make_tiny_gemma4(dest: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """Write ``dest/target`` (Gemma4ForCausalLM) and ``dest/draft`` (Gemma4AssistantForCausalLM); return both."""
    import torch
    from transformers import Gemma4AssistantConfig, Gemma4AssistantForCausalLM, Gemma4ForCausalLM, Gemma4TextConfig

    target_dir, draft_dir = dest / "target", dest / "draft"
    torch.manual_seed(seed)
    target_config = Gemma4TextConfig(**_text_config_kwargs(len(LAYER_TYPES), list(LAYER_TYPES), kv_shared=0))
    target = Gemma4ForCausalLM(target_config).eval()
    # Random init leaves norms at their neutral value; scale them so every weight matters for the comparison.
    with torch.no_grad():
        for name, param in target.named_parameters():
            if name.endswith("norm.weight") or name.endswith("layer_scalar"):
                param.uniform_(0.5, 1.5)
    target.save_pretrained(str(target_dir), safe_serialization=True)
    _patch_config(target_dir, {**_swa_keys(), "architectures": ["Gemma4ForCausalLM"]})
    _save_tokenizer(target_dir)

    torch.manual_seed(seed + 1)
    draft_text = _text_config_kwargs(len(LAYER_TYPES), list(LAYER_TYPES), kv_shared=len(LAYER_TYPES))
    draft_config = Gemma4AssistantConfig(text_config=Gemma4TextConfig(**draft_text), backbone_hidden_size=HIDDEN,
                                         use_ordered_embeddings=False, tie_word_embeddings=True)  # fmt: skip
    draft = Gemma4AssistantForCausalLM(draft_config).eval()
    draft.save_pretrained(str(draft_dir), safe_serialization=True)
    _patch_config(draft_dir, {"architectures": ["Gemma4AssistantForCausalLM"]})
    _save_tokenizer(draft_dir)
    return target_dir, draft_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    target, draft = make_tiny_gemma4(args.dest, seed=args.seed)
    print(json.dumps({"target": str(target), "draft": str(draft)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
