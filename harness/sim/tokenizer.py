"""A deterministic byte tokenizer for the reference server, and an HF-loadable copy of it on disk.

One token per UTF-8 byte (ids 0..255) plus four special tokens. ``write_hf_tokenizer(dir)``
writes the same tokenizer as a byte-level BPE without merges (``tokenizer.json``), which
``transformers.AutoTokenizer`` loads, so SGLang's ``bench_serving --tokenizer DIR`` can drive
the server. Written by hand: the ``tokenizers`` package is not needed to produce it.

Run ``python -m harness.sim.tokenizer DIR`` to write the folder.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = ["ByteTokenizer", "write_hf_tokenizer", "SPECIAL_TOKENS", "BOS_ID", "EOS_ID", "PAD_ID", "UNK_ID"]

BOS_ID, EOS_ID, PAD_ID, UNK_ID = 256, 257, 258, 259
SPECIAL_TOKENS = {BOS_ID: "<bos>", EOS_ID: "<eos>", PAD_ID: "<pad>", UNK_ID: "<unk>"}


class ByteTokenizer:
    """UTF-8 bytes in, bytes out; ids outside 0..255 decode to nothing (specials and reduced ids)."""

    eos_token_id = EOS_ID
    vocab_size = 260

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: Iterable[int]) -> str:
        return bytes(i for i in ids if 0 <= i < 256).decode("utf-8", errors="replace")


def _bytes_to_unicode() -> dict[int, str]:
    # GPT-2's printable mapping of bytes, which the ByteLevel pre-tokenizer and decoder expect.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def _tokenizer_json() -> dict:
    vocab = {ch: b for b, ch in _bytes_to_unicode().items()}
    added = [
        {"id": i, "content": tok, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for i, tok in SPECIAL_TOKENS.items()
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": vocab, "merges": []},
    }


def write_hf_tokenizer(directory: str | Path) -> Path:
    """Write ``tokenizer.json`` and ``tokenizer_config.json`` for the byte tokenizer; returns the folder."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(json.dumps(_tokenizer_json(), ensure_ascii=False), encoding="utf-8")
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": SPECIAL_TOKENS[BOS_ID], "eos_token": SPECIAL_TOKENS[EOS_ID],
        "pad_token": SPECIAL_TOKENS[PAD_ID], "unk_token": SPECIAL_TOKENS[UNK_ID],
        "model_max_length": 1 << 20, "clean_up_tokenization_spaces": False,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    return out


def _main(argv: Sequence[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: python -m harness.sim.tokenizer DIR\n")
        return 2
    write_hf_tokenizer(argv[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
