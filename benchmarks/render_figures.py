"""Quote benchmark figures in the docs from their records: ``python benchmarks/render_figures.py [--check]``.

A quoted figure is written in markdown as ``<!-- fig BENCHMARK PATH [SPEC] -->TEXT<!-- /fig -->``: PATH is a
dotted path into the newest record of ``BENCHMARK`` (``benchmarks/results/BENCHMARK/*.json``; ``@`` reads the
record's own fields, e.g. ``@load_before.0``, ``@commit``, ``@machine.cpu``), SPEC a Python format spec (default
``g``). Without ``--check`` every TEXT is rewritten from the records; with it nothing is written and the exit
status is 1 when a figure has no record, names a path its record lacks, or says another value than the record.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _results import REPO, newest_record

FIGURE = re.compile(r"<!-- fig (?P<bench>[\w.-]+) (?P<path>[@\w.-]+)(?: (?P<spec>[^ ]+))? -->(?P<text>.*?)<!-- /fig -->",
                    re.DOTALL)
DOCS = ("README.md", "benchmarks/README.md", "docs/alerts.md")


class FigureError(Exception):
    """A quoted figure that no record backs."""


def _lookup(data: Any, parts: Sequence[str]) -> Any:
    for part in parts:
        if isinstance(data, list) and part.lstrip("-").isdigit():
            data = data[int(part)]
        elif isinstance(data, dict) and part in data:
            data = data[part]
        else:
            raise KeyError(part)
    return data


def render_one(match: re.Match[str], results: Path | None) -> str:
    """The text a figure's marker stands for, from its benchmark's newest record."""
    bench, path, spec = match["bench"], match["path"], match["spec"] or "g"
    found = newest_record(bench, results)
    if found is None:
        raise FigureError(f"{bench}: no record under benchmarks/results/{bench}/")
    where = found if path.startswith("@") else found["result"]
    try:
        value = _lookup(where, path.lstrip("@").split("."))
    except (KeyError, IndexError):
        raise FigureError(f"{bench} {path}: not in {found['path']}") from None
    try:
        return format(value, spec)
    except (TypeError, ValueError):
        raise FigureError(f"{bench} {path}: {value!r} does not format as {spec!r}") from None


def check_text(text: str, results: Path | None = None) -> list[str]:
    """One line per quoted figure of ``text`` that its record does not back."""
    problems = []
    for match in FIGURE.finditer(text):
        try:
            want = render_one(match, results)
        except FigureError as exc:
            problems.append(str(exc))
            continue
        if match["text"] != want:
            problems.append(f"{match['bench']} {match['path']}: the text says {match['text']!r}, the record {want!r}")
    return problems


def render_text(text: str, results: Path | None = None) -> str:
    def sub(match: re.Match[str]) -> str:
        return match.group(0).replace(f"-->{match['text']}<!--", f"-->{render_one(match, results)}<!--", 1)

    return FIGURE.sub(sub, text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a figure is unbacked or stale")
    parser.add_argument("files", nargs="*", type=Path, help=f"markdown files (default: {', '.join(DOCS)})")
    args = parser.parse_args(argv)
    problems = []
    for path in args.files or [REPO / d for d in DOCS]:
        text = path.read_text(encoding="utf-8")
        if args.check:
            problems += [f"{path}: {p}" for p in check_text(text)]
            continue
        try:
            new = render_text(text)
        except FigureError as exc:
            problems.append(f"{path}: {exc}")
            continue
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"{path}: figures rendered")
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
