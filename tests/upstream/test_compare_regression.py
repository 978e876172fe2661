"""``sglang-repro issue`` from a comparison whose later build is slower: the metric's change in the title, its level
before and after with their intervals, the chart of every trial, and ``--case``/``--role`` picking."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.upstream import sources

pytestmark = [pytest.mark.slow, pytest.mark.standin]


@pytest.fixture(scope="module")
def comparison(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("compare")
    done = sources.harness("compare", sources.LONG, "--case", "tokens=276,path=graph", "--before", "sim:post-fix",
                           "--after", "sim:post-fix,step-cost-ms=5", "--trials", 5, "--out", out, "--no-store",
                           "--no-progress")
    assert done.returncode == 0 and "Output throughput worse" in done.stdout, done.stdout + done.stderr
    (folder,) = sorted((out / "compare").iterdir())
    return folder


def test_a_slower_build_is_reported_as_its_metrics_change(comparison: Path, tmp_path: Path) -> None:
    done = sources.harness("issue", comparison, "-o", tmp_path / "issue", "--allow-reference-server")
    assert done.returncode == 0, done.stdout + done.stderr
    title = (tmp_path / "issue" / "title.txt").read_text(encoding="utf-8")
    assert title.startswith("[Bug] Output throughput -") and " tok/s) since sim:post-fix,step-cost-ms=5" in title
    body = (tmp_path / "issue" / "issue.md").read_text(encoding="utf-8")
    assert "(5 values, 5 trials) before" in body and "(5 values, 5 trials) after" in body
    assert "**Since:** sim:post-fix,step-cost-ms=5 (role after) (last good: sim:post-fix)." in body
    csv = (tmp_path / "issue" / "attachments" / "chart.csv").read_text(encoding="utf-8").splitlines()
    assert len(csv) == 1 + 10 and sum(",after," in row for row in csv) == 5


def test_case_and_role_pick_or_refuse(comparison: Path, tmp_path: Path) -> None:
    none = sources.harness("issue", comparison, "--role", "before", "-o", tmp_path / "a", "--allow-reference-server")
    assert none.returncode == 2 and "no crash and no metric that got worse" in none.stderr  # the faster side
    bad = sources.harness("issue", comparison, "--case", "nope", "-o", tmp_path / "b", "--allow-reference-server")
    assert bad.returncode == 2 and "--case nope: no such case" in bad.stderr
