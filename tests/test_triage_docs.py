"""docs/triage.md shows real output: every ``$ sglang-repro triage ...`` block is run and must print what it shows."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "triage.md"
BLOCK = re.compile(r"```console\n\$ sglang-repro (triage [^\n]*)\n(.*?)```", re.DOTALL)
EXAMPLES = BLOCK.findall(DOC.read_text(encoding="utf-8"))


def test_the_doc_has_examples() -> None:
    assert len(EXAMPLES) >= 3
    assert any("fixed: known bug, fixed in 0.5.15 (PR #29616); 0.5.13 and 0.5.13.post1 lack the fix" in out
               for _, out in EXAMPLES)


@pytest.mark.parametrize(("command", "shown"), EXAMPLES, ids=[c[:60] for c, _ in EXAMPLES])
def test_each_example_prints_what_the_doc_shows(command: str, shown: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "harness", *shlex.split(command)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.stderr == ""
    assert proc.stdout == shown, f"docs/triage.md is out of date for: sglang-repro {command}"
