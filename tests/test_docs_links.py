"""The README and docs/ as a newcomer meets them: every relative link resolves to a file (and heading) inside the
repository, no heading names an issue number, and the README stays short enough to read in one sitting."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
MAX_README_LINES = 250

# [text](target) outside code: the target up to a space or the closing parenthesis.
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^(#{1,6}) +(.*?)\s*$")


def _pages() -> list[Path]:
    return [README, REPO / "benchmarks" / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _prose(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, numbered from 1."""
    out, fence = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if not fence:
            out.append((number, line))
    return out


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_anchor(m.group(2)) for _, line in _prose(path.read_text()) if (m := _HEADING.match(line))}


def _relative_links(path: Path) -> list[tuple[int, str]]:
    found = []
    for number, line in _prose(path.read_text()):
        for m in _LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            target = m.group(1)
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: are not ours to check
                found.append((number, target))
    return found


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves_inside_the_repository(page: Path) -> None:
    problems = []
    for number, target in _relative_links(page):
        file_part, _, fragment = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        where = f"{page.relative_to(REPO)}:{number}: {target}"
        if not dest.is_relative_to(REPO):
            problems.append(f"{where}: points outside the repository")
        elif not dest.exists():
            problems.append(f"{where}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in _anchors(dest):
            problems.append(f"{where}: no heading #{fragment} in {dest.relative_to(REPO)}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_heading_names_an_issue(page: Path) -> None:
    bad = [f"{page.relative_to(REPO)}:{n}: {line}" for n, line in _prose(page.read_text())
           if _HEADING.match(line) and re.search(r"\bissues? *#?\d+", line, re.I)]
    assert not bad, "\n".join(bad)


def test_the_readme_is_short() -> None:
    lines = README.read_text().count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines (at most {MAX_README_LINES}); move detail to docs/"


def test_the_docs_are_reachable_from_the_readme() -> None:
    """Every page under docs/ is linked from the README or from docs/index.md, which the README links."""
    linked = {(README.parent / t.partition("#")[0]).resolve() for _, t in _relative_links(README)}
    index = REPO / "docs" / "index.md"
    assert index.resolve() in linked
    linked |= {(index.parent / t.partition("#")[0]).resolve() for _, t in _relative_links(index)}
    orphans = [p.name for p in (REPO / "docs").glob("*.md") if p.resolve() not in linked and p != index]
    assert not orphans, f"docs pages no one links: {orphans}"


def test_the_index_lists_every_page() -> None:
    """docs/index.md is the reading order of all of docs/: a page linked only from the README is still listed."""
    index = REPO / "docs" / "index.md"
    listed = {(index.parent / t.partition("#")[0]).resolve() for _, t in _relative_links(index)}
    missing = sorted(p.name for p in (REPO / "docs").glob("*.md") if p != index and p.resolve() not in listed)
    assert not missing, f"docs/index.md does not list: {missing}"
