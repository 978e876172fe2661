"""validate's warning for text YAML drops as a comment (``description: fixed by PR #29616``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.scenario import source as source_module
from harness.scenario.comment_hazard import find_hazards
from harness.scenario.source import read_source

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"

TRICKY = """\
name: x
description: fixed by PR #29616
quoted: "kept #1"
naïve: café déjà #vu
spaced: a value # a comment written on purpose
list:
  - item one #glued
  # a comment line #only
nested: {a: 1}
block: |
  text #not-a-comment
"""


def test_each_plain_value_followed_by_a_glued_hash_word_is_named_with_its_line_column_and_field(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(TRICKY, encoding="utf-8")
    hazards = read_source(path).hazards
    assert [(h.line, h.column, h.field, h.excerpt) for h in hazards] == [
        (2, 25, "description", "#29616"), (4, 17, "naïve", "#vu"), (7, 13, "list.0", "#glued")]
    assert "'#29616' is a YAML comment" in hazards[0].message(path)


@pytest.mark.skipif(not source_module._LIBYAML, reason="PyYAML built without libyaml")
def test_libyaml_and_the_pure_composer_find_the_same_hazards(tmp_path: Path) -> None:
    texts = [p.read_text(encoding="utf-8") for p in sorted((REPO / "scenarios").rglob("*.yaml"))] + [TRICKY]
    for text in texts:
        fast = source_module._parse_with(source_module._CLoader, tmp_path / "s.yaml", text).hazards
        pure = source_module._parse_with(source_module._BoundedLoader, tmp_path / "s.yaml", text).hazards
        assert fast == pure
    assert source_module._parse_with(source_module._CLoader, tmp_path / "s.yaml", TRICKY).hazards


def test_text_without_a_candidate_line_is_not_looked_at() -> None:
    ends = [(0, 7, ("name",))]
    assert find_hazards("name: x\n# sglang#28264 in a comment line\n", ends) == ()
    assert find_hazards("name: x #28264\n", ends)[0].excerpt == "#28264"


def test_validate_warns_on_stderr_and_still_passes(tmp_path: Path) -> None:
    text = SEED.read_text(encoding="utf-8")
    target = tmp_path / "seed.yaml"
    lines = text.splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith("name: "))
    lines[i] += " #28264"
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "harness", "validate", str(target)], capture_output=True, text=True,
                          cwd=REPO, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert f"{target}:{i + 1}:" in done.stderr and "'#28264' is a YAML comment" in done.stderr
