"""Issue 49, the bullets that had no test of their own: a long build-spec value's error line is bounded (a
15 KB line for a long ``rules=``), and ``make test`` says its length and its background work before it starts."""

from __future__ import annotations

import re

import pytest

from tests.hostile._probe import CASE, REPO, SEED, refused


@pytest.mark.parametrize("where", ["--build", "--set"])
def test_a_long_rules_value_gives_a_bounded_error_line(capsys: pytest.CaptureFixture[str], where: str) -> None:
    spec = "sim:pre-fix,rules=0." + "9" * 4000  # under the 4096 a value may have: the spec's own check names it
    argv: list[object] = (["run", SEED, "--case", CASE, "--no-store", "--build", spec] if where == "--build"
                          else ["validate", SEED, "--set", f"builds.before.sim={spec.removeprefix('sim:')}"])
    line = refused(argv, capsys)
    assert len(line) < 1100, len(line)


def test_make_test_says_how_long_it_takes_and_what_it_does_beside_the_tests() -> None:
    """The figure it prints is the one docs/tests.md gives (one run's, named as such there)."""
    make = (REPO / "Makefile").read_text()
    recipe = make.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    said = " ".join(line.split("@echo", 1)[1] for line in recipe.splitlines() if "@echo" in line)
    seconds = re.search(r"(\d+) s of pytest", said)
    assert seconds and "sglang wheels" in said and "CPU environments" in said and "background" in said, said
    first_command = next(line for line in recipe.splitlines()[1:] if line.strip())
    assert "@echo" in first_command, "said before anything starts"
    docs = (REPO / "docs" / "tests.md").read_text()
    assert f"{seconds.group(1)} s of pytest" in docs
