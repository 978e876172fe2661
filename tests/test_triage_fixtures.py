"""Every triage fixture (fixtures/triage/*) gives the verdict marked in it: the entry, the level, the deciding line
and what the version says. ``UPDATE_FIXTURES=1`` rewrites the marks to what triage says now (then review the diff).

Fixtures with sglang frames and no version line fit their frames to the real releases: the wheels are fetched once
(``harness.contract.wheels``) and what each release's lines are is cached under the cache dir.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.signatures.catalogue import Catalogue
from harness.triage.fixture_file import read_fixture, rewrite_expectation
from harness.triage.verdicts import triage_text

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted((ROOT / "fixtures" / "triage").glob("*.*"))
CATALOGUE = Catalogue.load()
FAMILY = {s.id for s in CATALOGUE.signatures if s.family == "frozen-kv-mtp-28264"}


def test_there_are_fixtures_for_every_level_and_each_sibling() -> None:
    fixtures = [read_fixture(p) for p in FIXTURES]
    assert {f.level for f in fixtures} == {"confirmed", "probable", "possible", "none"}
    # every member of #28264's family with a public text (the CUDA-graph path has none yet: its tracebacks are
    # fixtures/tracebacks/sglang-0.5.14-graph-draft-trtllm-swa*.log, written from the 0.5.14 wheel)
    assert {f.expect for f in fixtures} >= FAMILY - {"frozen-kv-mtp-stale-out-cache-loc-graph"}
    assert all(f.source.startswith("https://") for f in fixtures)


@pytest.mark.parametrize("path", FIXTURES, ids=[p.name for p in FIXTURES])
def test_fixture_gives_its_marked_verdict(path: Path) -> None:
    fixture = read_fixture(path)
    verdict = triage_text(path, fixture.text, CATALOGUE, title=fixture.title, version=fixture.version)
    best = verdict.best
    got = (best.finding.signature.id if best is not None and best.finding.signature is not None else None,
           best.finding.level if best is not None else "none")
    line = best.finding.line_no if best is not None else None
    if os.environ.get("UPDATE_FIXTURES") == "1":
        rewrite_expectation(path, f"{got[0]}:{got[1]}" if got[0] else "none", line)
        return
    assert got == (fixture.expect, fixture.level), f"{path.name}: triage says {got}"
    if fixture.line is not None:
        assert line == fixture.line, f"{path.name}: decided by line {line}, the fixture marks {fixture.line}"
    if fixture.fixed is not None:
        assert best is not None and best.fixed is not None and fixture.fixed in best.fixed, (path.name, best)
    if fixture.expect is None or fixture.expect not in FAMILY:
        # a lookalike is never the family: not its verdict, and nothing of it above possible (a generic message
        # quoted alone is possible, which is what possible means)
        assert not any(j.finding.signature is not None and j.finding.signature.id in FAMILY
                       and j.finding.level in ("probable", "confirmed") for j in verdict.judged)
