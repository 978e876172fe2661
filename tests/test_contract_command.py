"""``sglang-repro contract BUILD``: the contract checked against a build's own sglang sources."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.contract import facts as contract
from harness.contract.check import check_package, check_sources, contract_table
from harness.contract.locate import reference_of, wordings
from harness.contract.sources import DirSources
from tests.helpers import copy_cited

ROOT = Path(__file__).resolve().parent.parent
FIX_CITE = contract.FACTS[[f.name for f in contract.FACTS].index("FIX_MARKER")].cites[0]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", "contract", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, check=False)


def test_another_release_is_compared_with_the_nearer_cited_one() -> None:
    assert reference_of("0.5.15") == "0.5.15" and reference_of("0.5.14") == "0.5.14"
    assert reference_of("0.5.13.post1") == "0.5.14"  # before the fix: expected as 0.5.14 (no fix marker)
    assert reference_of("0.5.15.post1") == "0.5.15" and reference_of("0.5.23") == "0.5.15"
    assert FIX_CITE.line("0.5.14") is None and FIX_CITE.line("0.5.15") is not None


@pytest.mark.slow
@pytest.mark.parametrize("version", contract.VERSIONS)
def test_the_cited_releases_hold_and_a_changed_one_names_the_fact(version: str, tmp_path: Path) -> None:
    from tests.real_sglang import real_sglang

    package = real_sglang(version).package
    assert check_package(package, version) == ([], len(contract.FACTS))
    changed = copy_cited(package, tmp_path / "sglang")
    http = changed / "srt/entrypoints/http_server.py"
    http.write_text(http.read_text().replace(contract.READY_LINE, "The server is up."))
    # on its line; anywhere, for an uncited release on the same side of the fix
    for as_version in (version, "0.5.13" if version == "0.5.14" else "0.5.15.post1"):
        drifts, _ = check_package(changed, as_version)
        # 0.5.14's own tokenizer manager read as 0.5.13's has the ShutdownReq and 15 s wait 0.5.13.x is recorded
        # without (facts.Earlier with no text), and its worker the cuda_graph_fully_disabled() 0.5.13.x lacks: changes,
        # rightly
        absent_before_0514 = ["SIGTERM_SCHEDULER_WAIT_S", "DRAFT_EAGER_CHOICE"] if as_version == "0.5.13" else []
        assert list(dict.fromkeys(d.fact for d in drifts)) == ["READY_LINE", *absent_before_0514]
        assert drifts[0].status == "changed" and drifts[0].function == "_wait_and_warmup"
        assert "sglang/srt/entrypoints/http_server.py" in drifts[0].describe()
        assert contract.READY_LINE in drifts[0].describe()
    (changed / "srt/speculative/frozen_kv_mtp_worker_v2.py").unlink()
    drifts = check_package(changed, version)[0]
    names = {d.fact for d in drifts}
    assert {"READY_LINE", "DRAFT_TOPK_BACKEND", "DRAFT_GRAPH_PATH"} <= names
    assert {d.status for d in drifts if d.fact == "DRAFT_GRAPH_PATH" and "worker_v2" in d.file} == {"gone"}
    assert ("FIX_MARKER" in names) == (version == "0.5.15")  # 0.5.14 has no fix marker to lose


@pytest.mark.slow
def test_a_line_pushed_down_is_moved_not_drifted(tmp_path: Path) -> None:
    from tests.real_sglang import real_sglang

    changed = copy_cited(real_sglang("0.5.15").package, tmp_path / "sglang")
    http = changed / "srt/entrypoints/http_server.py"
    http.write_text("# one more line\n" + http.read_text())
    located = [loc for loc in check_sources(DirSources(changed), "0.5.15") if loc.fact == "READY_LINE"]
    assert [(loc.status, loc.cited, loc.found) for loc in located] == [("moved", 2169, (2170,))]
    assert check_package(changed, "0.5.15")[0] == []  # moved is still read through


@pytest.mark.slow
def test_exit_status() -> None:
    ok = _cli("pip:sglang==0.5.15,deps=none")
    assert ok.returncode == 0, ok.stderr
    n = len(contract.FACTS)
    assert ok.stdout.strip().endswith(f"sglang 0.5.15: {n} holds of {n} facts; 0 read-through fact(s) changed or gone")
    assert _cli("sim:pre-fix").returncode == 2
    assert _cli("nonsense:x").returncode == 2
    no_sglang = _cli(f"python:{sys.executable}")  # the harness's own interpreter has no sglang
    assert no_sglang.returncode == 3, no_sglang.stderr


RANK_CITES = contract.FACTS[[f.name for f in contract.FACTS].index("LOG_RANK_TAGS")].cites


def test_a_reworded_line_is_looked_for_in_its_new_wording_from_its_release_on() -> None:
    dp = RANK_CITES[0]
    assert [t for _, t in wordings(dp, "0.5.15")] == [dp.text]  # a cited release: its own line
    assert [t for _, t in wordings(dp, "0.5.13")] == [dp.text]  # before any rewording
    assert [t for _, t in wordings(dp, "0.5.16")][0] == 'prefix += f" DP{shown_dp}"'
    assert [t for _, t in wordings(dp, "0.5.23")][0] == 'prefix += f" DP{shown_dp}"'
    pp = RANK_CITES[1]
    assert [t for _, t in wordings(pp, "0.5.20")] == [pp.text]
    assert [t for _, t in wordings(pp, "0.5.21")][0] == 'prefix += f" PP{parallel.pp_rank}"'
    assert len(wordings(dp, "unknown")) == 2  # no version to go by: either wording holds
    assert all(f == dp.file for f, _ in wordings(dp, "0.5.16"))


class _Files:
    """Sources held in memory (file -> text): the locator's input, nothing else about a release."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    def text(self, path: str) -> str | None:
        return self.files.get(path)


def test_a_line_recorded_absent_holds_only_while_it_is_absent() -> None:
    """The histogram alias is dropped in 0.5.21 (Later with no text): absent there it holds; present there it is a
    change nobody recorded; before 0.5.21 its absence is drift as before; a file read under a later wording counts
    among the cited files (pre-flight stamps it)."""
    from harness.contract.locate import locate

    fact = contract.FACTS[[f.name for f in contract.FACTS].index("SPEC_HISTOGRAM_KEYS")]
    alias = fact.cites[1]
    assert alias.text == 'meta_info["spec_accept_histogram"] = (' and wordings(alias, "0.5.21")[0][1] is None
    assert wordings(alias, "0.5.20")[0][1] == alias.text and all(t is not None for _, t in wordings(alias, "x"))
    without = _Files({alias.file: "def _calculate_spec_decoding_metrics(\n    pass\n"})
    with_it = _Files({alias.file: "def _calculate_spec_decoding_metrics(\n" + "    " + alias.text + "\n"})
    assert locate(fact, alias, without, "0.5.23", None).status == "holds"
    assert locate(fact, alias, with_it, "0.5.23", None).status == "changed"
    assert locate(fact, alias, without, "0.5.20", None).status == "gone"
    assert locate(fact, alias, with_it, "0.5.20", None).status == "moved"
    assert "srt/arg_groups/fields/serving.py" in contract.cited_files()


@pytest.mark.slow
def test_a_rewording_holds_from_its_release_on_and_nowhere_else(tmp_path: Path) -> None:
    from tests.real_sglang import real_sglang

    changed = copy_cited(real_sglang("0.5.15").package, tmp_path / "sglang")
    sched = changed / "srt/managers/scheduler.py"
    text = sched.read_text()
    for old, new in (('f" DP{dp_rank}"', 'f" DP{shown_dp}"'), ('f" TP{tp_rank}"', 'f" TP{shown_tp}"'),
                     ('f" EP{moe_ep_rank}"', 'f" EP{shown_moe_ep}"')):
        assert old in text
        text = text.replace(old, new)
    sched.write_text(text)
    # 0.5.16's wording (read in its wheel): the fact holds there and after, not as 0.5.15 or 0.5.13
    assert "LOG_RANK_TAGS" not in {d.fact for d in check_package(changed, "0.5.16")[0]}
    for version in ("0.5.15", "0.5.13"):
        drifts = [d for d in check_package(changed, version)[0] if d.fact == "LOG_RANK_TAGS"]
        assert {d.text for d in drifts} == {c.text for c in RANK_CITES[0::4] + RANK_CITES[5:6]}
    sched.write_text(text.replace('f" TP{shown_tp}"', 'f" TP{tp_shown}"'))  # a wording nobody recorded
    drifts = [d for d in check_package(changed, "0.5.16")[0] if d.fact == "LOG_RANK_TAGS"]
    assert [d.text for d in drifts] == ['prefix += f" TP{shown_tp}"']
    assert "sglang/srt/managers/scheduler.py:" in drifts[0].describe() and "lacks 'prefix" in drifts[0].describe()


@pytest.mark.slow
def test_the_release_table_of_the_cited_releases() -> None:
    from tests.real_sglang import real_sglang

    results = {v: check_sources(DirSources(real_sglang(v).package), v) for v in contract.VERSIONS}
    table = contract_table(results).splitlines()
    assert table[0] == "| fact | kind | 0.5.14 | 0.5.15 |"
    assert len(table) == 2 + len(contract.FACTS) + 1
    assert all(row.endswith("| holds | holds |") for row in table[2:-1])
    n = len(contract.FACTS)
    assert table[-1] == f"| **counts** | | {n} holds | {n} holds |"
