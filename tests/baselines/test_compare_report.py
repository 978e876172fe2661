"""A comparison's reports show its baseline checks (issue 34): a pull request's CI run holds acceptance against
the committed baseline, and the report says against which one and how, escaped in the HTML."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from harness.baselines.keys import this_cpu_key
from harness.baselines.role import RoleBaselines
from harness.compare.verdicts import CaseComparison, MetricVerdict
from harness.report.html import baseline_table

REPO = Path(__file__).resolve().parent.parent.parent
GUARD = REPO / "scenarios" / "frozen_kv_mtp" / "accept_length_guard.yaml"
COMMITTED = REPO / "fixtures" / "baselines" / "frozen-kv-mtp-accept-length-guard.yaml"


@pytest.mark.slow
def test_a_comparison_on_the_reference_server_reports_its_baseline_checks(run_cli, tmp_path: Path) -> None:
    # The committed baselines, keyed to this machine's CPU, in a folder whose name is markup: the HTML must show
    # it as text.
    folder = tmp_path / "<refs>&"
    folder.mkdir()
    text = re.sub(r"(?m)^  hardware: cpu .*$", f"  hardware: {this_cpu_key()}", COMMITTED.read_text())
    (folder / COMMITTED.name).write_text(text)
    out = tmp_path / "out"
    res = run_cli("compare", GUARD, "--case", "draft=topk1", "--reference", "--trials", "2",
                  "--set", "workload.requests=4", "--set", "workload.max_new_tokens=16", "--out", out,
                  env={"SGLANG_REPRO_BASELINES": str(folder)}, timeout=600)
    assert res.returncode in (0, 1), res.stdout[-2000:] + res.stderr[-2000:]
    (report_json,) = out.rglob("report.json")
    (case,) = json.loads(report_json.read_text())["cases"]
    refs = {r["role"]: r for r in case["baselines"]}
    assert set(refs) == {"before", "after"}, refs
    for ref in refs.values():
        assert ref["hardware"] == this_cpu_key() and ref["line"].startswith("sim:") and not ref["skipped"], ref
        assert ref["path"] == str(folder / COMMITTED.name)
        messages = [v["message"] for v in ref["verdicts"]]
        assert any(m.startswith("acceptance length ") for m in messages), messages
        assert any("draft position 1" in m for m in messages), messages
        assert all("band" in m and "baseline " in m for m in messages), messages
    page = (report_json.parent / "report.html").read_text()
    assert "<h3>Baseline checks</h3>" in page
    assert html.escape(str(folder / COMMITTED.name)) in page and "<refs>" not in page
    first = refs["after"]["verdicts"][0]["message"]
    assert html.escape(first) in page
    assert "| Role | Baseline | Measured against it | Held |" in (report_json.parent / "report.md").read_text()


def test_the_html_escapes_every_reference_text_and_says_why_none_was_judged() -> None:
    case = CaseComparison(
        case="c", values={}, roles=(), expectations=(), metrics=(), verdict=MetricVerdict.NOT_ENOUGH_DATA,
        baselines=(RoleBaselines("before", "cpu <x>", "sim:<b>", "/r/<s>.yaml", skipped="no baseline for <cpu>"),
                    RoleBaselines("after", "cpu x", "sim:post-fix", "/r/s.yaml",
                                   verdicts=("acceptance length 1.2 <script>", "acceptance rate at draft position 1"),
                                   held=(False, True))))
    table = baseline_table(case)
    assert "<script>" not in table and "&lt;script&gt;" in table and "no baseline for &lt;cpu&gt;" in table
    assert "cpu &lt;x&gt;" in table and "sim:&lt;b&gt;" in table and "/r/&lt;s&gt;.yaml" in table
    assert table.count("NOT HELD") == 1 and "not judged" in table
    assert RoleBaselines.from_dict(case.baselines[1].to_dict()) == case.baselines[1]
    assert case.baselines[1].state == "1 of 2 failed" and case.baselines[0].state == "not judged"


def test_a_role_without_a_reference_or_figures_says_why_it_was_not_judged(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.baselines.role import judge_role_baselines
    from harness.records.outcome import Outcome
    from harness.scenario import load_file, select_cases
    from tests.helpers import make_record

    monkeypatch.setenv("SGLANG_REPRO_BASELINES", str(tmp_path))  # an empty folder: no baseline file at all
    (case,) = select_cases(load_file(GUARD), "draft=topk1")
    passed = [make_record(run_id=f"r{t}", trial=t, spec="sim:post-fix") for t in range(2)]
    got = judge_role_baselines(case, "after", passed)
    assert got is not None and got.skipped.startswith("no baseline for cpu ") and got.line == "sim:post-fix"
    crashed = [make_record(Outcome.CRASH, run_id="c", signature="x", metrics={})]
    assert judge_role_baselines(case, "after", crashed).skipped == "no trial measured its workload"  # type: ignore[union-attr]
    assert judge_role_baselines(case, "after", []) is None
