"""Prompts of exact token counts, reproducible across processes and builds.

Two sources:

- random ids (`random_id_prompts`): what `sglang.bench_serving --dataset-name random-ids` sends; needs no
  tokenizer, so it works for every build and for the CPU reference server.
- fixture text (`text_prompts`): a text tokenized with the model's own tokenizer, sliced (and repeated when
  short) to the exact length, then sent as `input_ids` so the server sees exactly that many tokens.

Determinism: every prompt draws from its own generator seeded with sha256(seed, index), never from Python's
`hash()` (salted per process) or a shared global generator, so the same seed gives the same ids in the
"before" and the "after" run, whatever else either process did.
"""

from __future__ import annotations

import hashlib
import importlib.util
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.util.errors import InfraError, UserError

__all__ = ["Prompt", "random_id_prompts", "text_prompts", "prompt_lengths", "fit_token_ids", "load_tokenizer"]


@dataclass(frozen=True)
class Prompt:
    """One prompt. `input_ids` is sent when present (exact count), else `text`; `tokens` is the count."""

    input_ids: tuple[int, ...] | None
    text: str | None
    tokens: int


def _rng(seed: int, *parts: object) -> random.Random:
    material = ":".join(str(p) for p in (seed, *parts)).encode()
    return random.Random(int.from_bytes(hashlib.sha256(material).digest()[:8], "big"))


def _check_lengths(lengths: Sequence[int]) -> list[int]:
    out = []
    for i, n in enumerate(lengths):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise UserError(f"prompt length #{i} is {n!r}: each prompt length must be an integer >= 1")
        out.append(n)
    return out


def random_id_prompts(
    lengths: Sequence[int], *, seed: int, vocab: tuple[int, int] = (0, 32000)
) -> list[Prompt]:
    """Prompts of random token ids in `[vocab[0], vocab[1])`, one per length, deterministic in `seed`."""
    lo, hi = vocab
    if not (0 <= lo < hi):
        raise UserError(f"vocab range {vocab!r} is empty: need 0 <= low < high")
    prompts = []
    for i, n in enumerate(_check_lengths(lengths)):
        rng = _rng(seed, "random-ids", i)
        ids = tuple(rng.randrange(lo, hi) for _ in range(n))
        prompts.append(Prompt(input_ids=ids, text=None, tokens=n))
    return prompts


def fit_token_ids(ids: Sequence[int], length: int, *, seed: int, index: int = 0) -> tuple[int, ...]:
    """`length` ids read cyclically from `ids`, starting at a seeded offset (so prompts differ)."""
    if not ids:
        raise UserError("the prompt text tokenizes to zero tokens: give a non-empty fixture text")
    start = _rng(seed, "text-offset", index).randrange(len(ids))
    return tuple(ids[(start + k) % len(ids)] for k in range(length))


class _Tokenizer:
    """The two calls the harness needs, over whichever tokenizer library is installed."""

    def __init__(self, encode: Callable[[str], list[int]], decode: Callable[[list[int]], str]) -> None:
        self.encode = encode
        self.decode = decode


def _tokenizer_json(path: str) -> Path | None:
    p = Path(path).expanduser()
    if p.is_file() and p.name.endswith(".json"):
        return p
    if (p / "tokenizer.json").is_file():
        return p / "tokenizer.json"
    if p.exists():
        return None
    # Not a local path: look in the Hugging Face cache only; a run must never download.
    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(path, "tokenizer.json", local_files_only=True))
    except Exception:
        return None


def load_tokenizer(tokenizer_path: str) -> _Tokenizer:
    """Load a tokenizer from a local path or the HF cache with `tokenizers` or `transformers`, if importable."""
    has_tokenizers = importlib.util.find_spec("tokenizers") is not None
    has_transformers = importlib.util.find_spec("transformers") is not None
    if not (has_tokenizers or has_transformers):
        raise InfraError(
            f"text prompts need a tokenizer for {tokenizer_path!r}, but neither the 'tokenizers' nor the "
            "'transformers' package is importable; install one, or use random-id prompts"
        )
    json_file = _tokenizer_json(tokenizer_path) if has_tokenizers else None
    if json_file is not None:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(json_file))
        return _Tokenizer(
            lambda s: tok.encode(s, add_special_tokens=False).ids,
            lambda ids: tok.decode(list(ids)),
        )
    if has_transformers:
        from transformers import AutoTokenizer

        try:
            hf = AutoTokenizer.from_pretrained(tokenizer_path, local_files_only=True)
        except (OSError, ValueError) as exc:
            raise InfraError(f"cannot load tokenizer {tokenizer_path!r} (local path or HF cache): {exc}") from None
        return _Tokenizer(
            lambda s: list(hf.encode(s, add_special_tokens=False)),
            lambda ids: hf.decode(list(ids)),
        )
    raise InfraError(
        f"no tokenizer.json for {tokenizer_path!r} as a local path or in the HF cache, and 'transformers' "
        "(which reads other tokenizer formats) is not importable"
    )


def text_prompts(lengths: Sequence[int], *, text: str, tokenizer_path: str, seed: int) -> list[Prompt]:
    """Prompts cut from `text` tokenized by the model's tokenizer; ids are sent, so counts are exact."""
    lengths = _check_lengths(lengths)
    tok = load_tokenizer(tokenizer_path)
    ids = tok.encode(text)
    prompts = []
    for i, n in enumerate(lengths):
        fitted = fit_token_ids(ids, n, seed=seed, index=i)
        prompts.append(Prompt(input_ids=fitted, text=tok.decode(list(fitted)), tokens=n))
    return prompts


def prompt_lengths(
    spec_tokens: int | Sequence[int] | range | Mapping[str, int], n_requests: int, seed: int
) -> list[int]:
    """Lengths for `n_requests` prompts.

    `spec_tokens` is an int (every prompt that long), a list/tuple (cycled in order), a `range` or a mapping
    `{min: a, max: b}` (inclusive; each length drawn uniformly, seeded).
    """
    if isinstance(n_requests, bool) or not isinstance(n_requests, int) or n_requests < 0:
        raise UserError(f"number of requests is {n_requests!r}: must be an integer >= 0")
    if isinstance(spec_tokens, int) and not isinstance(spec_tokens, bool):
        _check_lengths([spec_tokens])
        return [spec_tokens] * n_requests
    if isinstance(spec_tokens, Mapping):
        if set(spec_tokens) != {"min", "max"}:
            raise UserError(f"prompt length range {dict(spec_tokens)!r}: expected exactly the keys 'min' and 'max'")
        lo, hi = spec_tokens["min"], spec_tokens["max"]
        _check_lengths([lo, hi])
        if lo > hi:
            raise UserError(f"prompt length range has min {lo} > max {hi}")
        spec_tokens = range(lo, hi + 1)
    if isinstance(spec_tokens, range):
        if len(spec_tokens) == 0:
            raise UserError(f"prompt length {spec_tokens!r} is empty")
        _check_lengths([spec_tokens[0], spec_tokens[-1]])
        rng = _rng(seed, "lengths")
        return [spec_tokens[rng.randrange(len(spec_tokens))] for _ in range(n_requests)]
    if isinstance(spec_tokens, Sequence) and not isinstance(spec_tokens, (str, bytes)):
        values = _check_lengths(list(spec_tokens))
        if not values:
            raise UserError("prompt length list is empty: give at least one length")
        return [values[i % len(values)] for i in range(n_requests)]
    raise UserError(
        f"prompt length {spec_tokens!r}: expected an integer, a list of integers, or {{min: N, max: M}}"
    )
