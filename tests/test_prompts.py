"""Prompts: exact token counts, determinism across processes, tokenizer fallbacks."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.util.errors import InfraError, UserError
from harness.workload.prompts import Prompt, fit_token_ids, prompt_lengths, random_id_prompts, text_prompts

REPO = Path(__file__).resolve().parents[1]


def test_random_ids_have_exact_lengths_and_stay_in_vocab() -> None:
    prompts = random_id_prompts([1, 7, 300], seed=3, vocab=(100, 110))
    assert [p.tokens for p in prompts] == [1, 7, 300]
    assert [len(p.input_ids or ()) for p in prompts] == [1, 7, 300]
    assert all(100 <= i < 110 for p in prompts for i in p.input_ids or ())
    assert all(p.text is None for p in prompts)
    # 300 draws from 10 values: every value shows up, so the whole range is used.
    assert set(prompts[2].input_ids or ()) == set(range(100, 110))


def test_random_ids_are_seeded_and_independent_of_other_prompts() -> None:
    a = random_id_prompts([50, 60], seed=1)
    assert a == random_id_prompts([50, 60], seed=1)
    assert a != random_id_prompts([50, 60], seed=2)
    assert a[0].input_ids != a[1].input_ids[:50]  # type: ignore[index]
    # Prompt i depends on (seed, i, its length) only: changing another length leaves it alone.
    assert random_id_prompts([50, 999], seed=1)[0] == a[0]


@pytest.mark.slow
def test_random_ids_are_identical_in_another_process() -> None:
    code = (
        "import json; from harness.workload.prompts import random_id_prompts; "
        "print(json.dumps([list(p.input_ids) for p in random_id_prompts([5, 9], seed=42)]))"
    )
    outs = []
    for hashseed in ("1", "2"):
        proc = subprocess.run(
            [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
            env={"PYTHONHASHSEED": hashseed, "PATH": "/usr/bin:/bin"},
        )
        assert proc.returncode == 0, proc.stderr
        outs.append(json.loads(proc.stdout))
    here = [list(p.input_ids or ()) for p in random_id_prompts([5, 9], seed=42)]
    assert outs[0] == outs[1] == here


@pytest.mark.parametrize("bad", [[0], [-3], [2.5], [True]])
def test_bad_lengths_are_user_errors(bad: list) -> None:
    with pytest.raises(UserError, match="prompt length #0"):
        random_id_prompts(bad, seed=0)


def test_empty_vocab_is_a_user_error() -> None:
    with pytest.raises(UserError, match="vocab"):
        random_id_prompts([3], seed=0, vocab=(5, 5))


def test_fit_token_ids_slices_and_repeats() -> None:
    ids = list(range(10))
    short = fit_token_ids(ids, 4, seed=0, index=0)
    assert len(short) == 4
    start = short[0]
    assert short == tuple((start + k) % 10 for k in range(4))
    long = fit_token_ids(ids, 25, seed=0, index=1)
    assert len(long) == 25 and set(long) == set(ids)
    offsets = {fit_token_ids(ids, 1, seed=0, index=i)[0] for i in range(40)}
    assert len(offsets) > 1, "prompts should start at different places in the text"
    with pytest.raises(UserError):
        fit_token_ids([], 3, seed=0)


@pytest.mark.skipif(
    importlib.util.find_spec("tokenizers") is not None or importlib.util.find_spec("transformers") is not None,
    reason="a tokenizer library is installed",
)
def test_text_prompts_without_tokenizer_library_is_infra_error(tmp_path: Path) -> None:
    with pytest.raises(InfraError, match="tokenizers.*transformers"):
        text_prompts([4], text="hello world", tokenizer_path=str(tmp_path), seed=0)


def test_text_prompts_with_a_real_tokenizer(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog"]
    tok = tokenizers.Tokenizer(WordLevel({w: i for i, w in enumerate(words)} | {"[UNK]": 99}, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    prompts = text_prompts([3, 20], text=" ".join(words), tokenizer_path=str(tmp_path), seed=5)
    assert [len(p.input_ids or ()) for p in prompts] == [3, 20]
    assert all(isinstance(p.text, str) and p.text for p in prompts)
    assert prompts == text_prompts([3, 20], text=" ".join(words), tokenizer_path=str(tmp_path), seed=5)


def test_prompt_lengths_int_list_range_mapping() -> None:
    assert prompt_lengths(8, 3, seed=0) == [8, 8, 8]
    assert prompt_lengths([4, 5], 5, seed=0) == [4, 5, 4, 5, 4]
    drawn = prompt_lengths(range(10, 20), 200, seed=7)
    assert len(drawn) == 200 and set(drawn) <= set(range(10, 20)) and len(set(drawn)) == 10
    assert drawn == prompt_lengths(range(10, 20), 200, seed=7)
    assert drawn != prompt_lengths(range(10, 20), 200, seed=8)
    mapped = prompt_lengths({"min": 3, "max": 4}, 50, seed=1)
    assert set(mapped) == {3, 4}
    assert prompt_lengths(8, 0, seed=0) == []


@pytest.mark.parametrize(
    ("spec", "match"),
    [([], "empty"), ({"min": 5, "max": 2}, "min 5 > max 2"), ({"lo": 1}, "min"), ("12", "expected"),
     (0, "length"), (range(0, 3), "length")],
)
def test_prompt_lengths_rejects_bad_specs(spec: object, match: str) -> None:
    with pytest.raises(UserError, match=match):
        prompt_lengths(spec, 4, seed=0)  # type: ignore[arg-type]


def test_prompt_is_frozen() -> None:
    p = Prompt(input_ids=(1,), text=None, tokens=1)
    with pytest.raises(AttributeError):
        p.tokens = 2  # type: ignore[misc]
