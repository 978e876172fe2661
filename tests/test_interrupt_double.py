"""The kill matrix with double signals (issue 24, item 4): a second SIGINT or SIGTERM about a second after the
first, while the run tears down, only hurries the teardown; the record is still written, nothing survives.

Small on purpose (one case, the light workload of tests/test_interrupt.py): each example starts one
reference server; bisect's searches a generated six-commit history (harness.bisect.demo_repo) and is
interrupted in its first step, after its two endpoints. ``SGLANG_REPRO_DOUBLE_SIGNAL_GAP_S`` changes the
gap between the two signals.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.checkout_digest import checkout_digest
from tests.test_interrupt import REPO, _run_processes, _scenario, _wait_for

pytestmark = pytest.mark.slow

GAP_S = float(os.environ.get("SGLANG_REPRO_DOUBLE_SIGNAL_GAP_S", "1.0"))


@pytest.mark.parametrize("command", ["run", "compare", "nightly", "minimize"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_a_second_signal_during_teardown_loses_no_record(tmp_path: Path, command: str, sig: int) -> None:
    out = tmp_path / "out"
    scenario = str(_scenario(tmp_path))
    if command == "compare":
        argv = ["compare", scenario, "--case", "tokens=276,path=graph", "--reference", "--out", str(out)]
    else:
        argv = [command, scenario, "--case", "tokens=276,path=graph", "--build", "sim:post-fix", "--out", str(out)]
    harness = subprocess.Popen([sys.executable, "-m", "harness", *argv], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(out, ready=True)
        time.sleep(1.0)
        assert _run_processes(out), "the server should be running now"
        harness.send_signal(sig)
        time.sleep(GAP_S)
        if harness.poll() is None:
            harness.send_signal(sig)
        began = time.monotonic()
        stdout, stderr = harness.communicate(timeout=60)
        took = time.monotonic() - began
        deadline = time.monotonic() + 10
        while _run_processes(out) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _run_processes(out), "processes of the run survived the harness"
        assert "Traceback" not in stderr, stderr
        results = list(out.glob("**/runs/*/result.json"))
        assert results, f"no record (exit {harness.returncode}): {stdout[-2000:]} {stderr[-2000:]}"
        record = json.loads(results[0].read_text())
        assert record["outcome"] == "interrupted", record["outcome"]
        assert harness.returncode in (3, 130), (harness.returncode, stdout[-2000:], stderr[-2000:])
        if command == "compare":
            assert list(out.glob("compare/*/report.json")), "compare wrote no report"
        if command == "minimize":
            (report,) = list(out.glob("minimize/*/report.md"))
            assert "interrupted" in report.read_text().splitlines()[0], report.read_text()[:500]
            assert harness.returncode == 3
        print(f"{command} {signal.Signals(sig).name}: exit {harness.returncode}, ended {took:.2f} s after the "
              f"second signal, teardown {record['server']['teardown']}")
    finally:
        if harness.poll() is None:
            harness.kill()
        for proc in _run_processes(out):
            proc.kill()


# -- bisect ----------------------------------------------------------------------------------------

BISECT_SCENARIO = REPO / "fixtures" / "bisect" / "stale_out_cache_loc_tiny.yaml"


@pytest.fixture(scope="module")
def tiny_history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """Six commits of the reference server (c0..c5), only the last one bad: every step of the search is a post-fix
    server whose workload lasts a few seconds (the base step cost), so a signal lands in a step's run."""
    from harness.bisect.demo_repo import STEP_COST_MS, Layout, make_demo_repo

    # c5 the culprit; the unrelated crash comes and goes within c1; the fix and the slowdown in c6, out of range.
    layout = Layout(commits=7, culprit=5, fix=6, unrelated_add=1, unrelated_remove=1, broken=(), slowdown=6,
                    tag_every=10_000)
    repo = tmp_path_factory.mktemp("tiny-history") / "demo"
    return repo, make_demo_repo(repo, layout, step_cost_ms=STEP_COST_MS)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_a_second_signal_during_a_bisects_teardown_loses_no_record(tmp_path: Path, sig: int,
                                                                    tiny_history: tuple[Path, dict[str, str]]) -> None:
    repo, named = tiny_history
    before = checkout_digest(repo)
    out = tmp_path / "out"
    scenario = yaml.safe_load(BISECT_SCENARIO.read_text())
    scenario["workload"]["requests"] = 4  # a post-fix run's workload lasts about 8 s: the signal lands in it
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(scenario, sort_keys=False))
    argv = [sys.executable, "-m", "harness", "bisect", str(tmp_path / "tiny.yaml"), "--repo", str(repo), "--good",
            named["c0"], "--bad", named["c5"], "--trials", "1", "--confirm-trials", "1", "--out", str(out)]
    harness = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "SGLANG_REPRO_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 240
        while not any("step 1 of" in p.read_text() for p in out.glob("bisect/*/git-bisect-run.log")):
            assert harness.poll() is None and time.monotonic() < deadline, harness.communicate()[1][-2000:]
            time.sleep(0.1)
        def server_logs() -> set[Path]:  # a server's own log (servers/, shared by trials) or a run's
            return {*out.glob("bisect/*/servers/*/server.log"), *out.glob("bisect/*/runs/*/server.log")}

        endpoints = server_logs()  # the endpoints' servers, done
        while not any("ready to roll" in p.read_text(errors="replace") for p in server_logs() - endpoints):
            assert harness.poll() is None and time.monotonic() < deadline, "the step's server never became ready"
            time.sleep(0.05)
        time.sleep(1.0)
        assert _run_processes(out), "the step's server should be running now"
        harness.send_signal(sig)
        time.sleep(GAP_S)
        if harness.poll() is None:
            harness.send_signal(sig)
        stdout, stderr = harness.communicate(timeout=60)
        deadline = time.monotonic() + 10
        while _run_processes(out) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _run_processes(out), "processes of the search survived the harness"
        assert "Traceback" not in stderr, stderr[-3000:]
        assert harness.returncode == 3, (harness.returncode, stdout[-2000:], stderr[-2000:])
        (folder,) = list(out.glob("bisect/*"))
        report = json.loads((folder / "report.json").read_text())
        assert report["status"] == "interrupted" and report["exit_code"] == 3, report["summary"]
        kinds = [s["kind"] for s in report["commits"]["steps"]]
        assert kinds[:2] == ["endpoint", "endpoint"], kinds  # what it had judged is in the report
        assert "interrupted" in (folder / "report.md").read_text().splitlines()[2]
        records = [json.loads(p.read_text()) for p in folder.glob("runs/*/result.json")]
        assert len(records) == 3, [r["outcome"] for r in records]  # two endpoints and the interrupted step
        assert "interrupted" in {r["outcome"] for r in records}, [r["outcome"] for r in records]
        assert checkout_digest(repo) == before, "the user's checkout moved"
        state = json.loads((folder / "state.json").read_text())
        assert not Path(state["build_template"].split(":", 1)[1]).exists(), "the search's clone is left"
        print(f"bisect {signal.Signals(sig).name}: exit {harness.returncode}; {report['summary']}")
    finally:
        if harness.poll() is None:
            harness.kill()
        for proc in _run_processes(out):
            proc.kill()


# -- nightly: two Ctrl-Cs while a passing run tears its server down ------------------------------------------------


def test_two_sigints_during_a_nightly_runs_teardown_keep_the_pass_and_exit_3(tmp_path: Path) -> None:
    """Issue 37: the run's workload is done and judged when its server is told to stop (the reference server
    logs SGLang's SIGTERM line); two SIGINTs then must only hurry the teardown. The probe saw the pass record
    kept but exit 130, without the summary."""
    import sqlite3

    from harness.contract.facts import SIGTERM_LINE

    out, db = tmp_path / "out", tmp_path / "s.db"
    seed = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"
    harness = subprocess.Popen([sys.executable, "-m", "harness", "nightly", str(seed), "--case",
                                "tokens=276,path=eager", "--build", "sim:post-fix", "--trials", "1", "--no-progress",
                                "--out", str(out), "--store", str(db)],
                               cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while not any(SIGTERM_LINE in p.read_text(errors="replace") for p in out.glob("runs/*/server.log")):
            assert harness.poll() is None and time.monotonic() < deadline, harness.communicate()[1][-2000:]
            time.sleep(0.01)
        assert _run_processes(out), "the server should still be tearing down"
        harness.send_signal(signal.SIGINT)
        time.sleep(0.05)
        harness.send_signal(signal.SIGINT)
        stdout, stderr = harness.communicate(timeout=60)
        deadline = time.monotonic() + 10
        while _run_processes(out) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _run_processes(out), "processes of the run survived the harness"
        assert "Traceback" not in stderr, stderr[-3000:]
        assert harness.returncode == 3, (harness.returncode, stdout[-2000:], stderr[-2000:])
        assert "interrupted" in stdout and "1 pass" in stdout, stdout  # the summary, with the kept pass
        [record] = [json.loads(p.read_text()) for p in out.glob("runs/*/result.json")]
        assert record["outcome"] == "pass", record["outcome"]
        conn = sqlite3.connect(db)
        try:
            assert [o for (o,) in conn.execute("SELECT outcome FROM runs")] == ["pass"]
        finally:
            conn.close()
    finally:
        if harness.poll() is None:
            harness.kill()
        for proc in _run_processes(out):
            proc.kill()
