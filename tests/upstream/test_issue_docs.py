"""docs/issue.md's full example is what the generator writes from the demo today (``python -m harness.upstream.example``),
and the README's command list has the command's line."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.upstream.example import generate, page_example

pytestmark = [pytest.mark.slow, pytest.mark.standin]

REPO = Path(__file__).resolve().parent.parent.parent


def test_the_pages_example_is_the_generators_output(tmp_path: Path) -> None:
    page = (REPO / "docs" / "issue.md").read_text(encoding="utf-8")
    made = generate(REPO, tmp_path)
    assert "### Reproduction" in made and "<time>" in made  # the generator ran and normalised
    assert page_example(page) == made, "docs/issue.md is stale: python -m harness.upstream.example > the example block"


def test_the_readme_lists_the_command() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert any(line.startswith("- `issue ") and "(docs/issue.md)" in line for line in readme.splitlines())
