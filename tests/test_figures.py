"""Figures the docs quote come from benchmark records (benchmarks/results/), rendered by
benchmarks/render_figures.py: none is typed by hand, none goes stale unnoticed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

import _results  # noqa: E402
import render_figures  # noqa: E402


def _record(folder: Path, bench: str, stamp: str, result: dict[str, object]) -> None:
    (folder / bench).mkdir(parents=True, exist_ok=True)
    (folder / bench / f"{stamp}-abc.json").write_text(json.dumps({"benchmark": bench, "commit": "abc", "result": result,
                                                                  "load_before": [1.5, 1.0, 0.5]}))


def test_every_figure_the_docs_quote_is_its_newest_record() -> None:
    problems = [f"{doc}: {p}" for doc in render_figures.DOCS
                for p in render_figures.check_text((REPO / doc).read_text(encoding="utf-8"), _results.DEFAULT_RESULTS)]
    assert problems == [], "run `python benchmarks/render_figures.py` after recording, or record the benchmark"


def test_the_readmes_measured_section_quotes_no_number_without_a_record() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Measured\n", 1)[1].split("\n## ", 1)[0]
    assert render_figures.FIGURE.search(section), "the Measured section quotes its figures from records"
    bare = render_figures.FIGURE.sub("", section)
    bare = re.sub(r"`[^`]*`|\[[^\]]*\]\([^)]*\)", "", bare)  # commands and links
    assert re.findall(r"\d+(?:\.\d+)?", bare) == []


def test_a_figure_without_a_record_or_with_another_value_is_named(tmp_path: Path) -> None:
    _record(tmp_path, "bench_x", "20260101T000000Z", {"a": {"median_s": 3.14159}})
    _record(tmp_path, "bench_x", "20260102T000000Z", {"a": {"median_s": 2.5}})  # the newer one counts
    text = ("ok <!-- fig bench_x a.median_s .2f -->2.50<!-- /fig --> stale <!-- fig bench_x a.median_s .2f -->3.14"
            "<!-- /fig --> none <!-- fig bench_y a.b -->1<!-- /fig --> path <!-- fig bench_x a.nope -->1<!-- /fig -->"
            " load <!-- fig bench_x @load_before.0 -->1.5<!-- /fig -->")
    problems = render_figures.check_text(text, tmp_path)
    assert problems == ["bench_x a.median_s: the text says '3.14', the record '2.50'",
                        "bench_y: no record under benchmarks/results/bench_y/",
                        f"bench_x a.nope: not in {tmp_path / 'bench_x' / '20260102T000000Z-abc.json'}"]
    fixed = render_figures.render_text(text.replace(" none <!-- fig bench_y a.b -->1<!-- /fig -->", "")
                                       .replace(" path <!-- fig bench_x a.nope -->1<!-- /fig -->", ""), tmp_path)
    assert render_figures.check_text(fixed, tmp_path) == [] and fixed.count("-->2.50<!--") == 2


@pytest.mark.slow
def test_a_benchmark_run_leaves_its_record_with_commit_machine_and_load(tmp_path: Path) -> None:
    results = tmp_path / "results"
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_validate.py"), "--files", "5", "--rounds", "1",
                           "--work", str(tmp_path / "work")], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, _results.RESULTS_ENV: str(results)}, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    [path] = list((results / "bench_validate").glob("*.json"))
    body = json.loads(path.read_text())
    assert body["result"] == json.loads(done.stdout)
    assert body["commit"] and body["machine"]["cores"] and len(body["load_before"]) == 3
