"""The harness's own commands against real SGLang on the CPU (issue 50, deliverable 3): ``run`` and ``compare`` on
``pip:sglang==0.5.21,deps=cpu`` serving the tiny Llama end ``pass`` with client and server figures, every record
and report says what the build is, and after SIGTERM, SIGKILL or Ctrl-C of the harness no process of SGLang's
own tree (the launcher, ``sglang::scheduler``, ``sglang::detokenizer``, multiprocessing's resource tracker)
survives. One real server at a time (xdist group ``sglang_cpu``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from harness.build.labels import CPU_BUILD_LABEL, CPU_BUILD_NOTICE
from harness.contract.facts import READY_LINE
from harness.server.reaper import TAG_VAR
from tests.helpers import REPO

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("sglang_cpu")]

TINY = REPO / "scenarios" / "sglang_cpu" / "tiny_llama.yaml"
RELEASE = os.environ.get("SGLANG_REPRO_CPU_HARNESS_RELEASE", "0.5.21")  # a release measured to serve the tiny Llama
SPEC = f"pip:sglang=={RELEASE},deps=cpu"
WAIT_S = 600.0  # a first start on two loaded cores; a warm one takes about 20 s


def _harness(*args: str, out: Path) -> list[str]:
    return [sys.executable, "-m", "harness", *args, "--out", str(out), "--no-progress", "--no-store"]


def _tree(out: Path) -> list[psutil.Process]:
    """Every live process a run under ``out`` started: those carrying its run tag, and every process of their
    process groups. SGLang's scheduler and detokenizer call setproctitle, which overwrites the environment block
    /proc/PID/environ shows: their tag cannot be read there, only their group (the launcher's) finds them."""
    runs = [d.name for d in [*out.glob("**/runs/*"), *out.glob("**/servers/*")]]
    tagged, groups = [], set()
    for proc in psutil.process_iter(["pid"]):
        try:
            tag = proc.environ().get(TAG_VAR, "")
            if tag and any(tag.startswith(name) for name in runs) and proc.status() != psutil.STATUS_ZOMBIE:
                tagged.append(proc)
                groups.add(os.getpgid(proc.pid))
        except (psutil.Error, OSError):
            continue
    found = {proc.pid: proc for proc in tagged}
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.pid not in found and os.getpgid(proc.pid) in groups - {os.getpgrp()} \
                    and proc.status() != psutil.STATUS_ZOMBIE:
                found[proc.pid] = proc
        except (psutil.Error, OSError):
            continue
    return list(found.values())


def _names(procs: list[psutil.Process]) -> set[str]:
    """What each process is: SGLang's launcher, its ``sglang::`` children (by their titles), the resource tracker."""
    names = set()
    for proc in procs:
        try:
            line = " ".join(proc.cmdline())
        except psutil.Error:
            continue
        names.add("resource_tracker" if "resource_tracker" in line else line.split()[0] if line.startswith("sglang::")
                  else "launcher" if "sglang.launch_server" in line else line[:60])
    return names


def _gone(out: Path, within_s: float = 20.0) -> list[psutil.Process]:
    deadline = time.monotonic() + within_s
    while (left := _tree(out)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def test_run_passes_with_client_and_server_figures_and_leaves_no_process(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run(_harness("run", str(TINY), "--build", SPEC, out=out), cwd=REPO, capture_output=True,
                          text=True, timeout=WAIT_S + 300)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    [line] = [x for x in done.stdout.splitlines() if x.startswith("PASS")]
    assert f"{SPEC} ({CPU_BUILD_LABEL})" in line
    [result] = out.glob("**/runs/*/result.json")
    record = json.loads(result.read_text())
    assert record["outcome"] == "pass" and record["build"]["label"] == CPU_BUILD_LABEL
    assert record["build"]["version"] == RELEASE
    metrics = record["metrics"]
    assert metrics["requests_ok"] == 4 and metrics["requests_failed"] == 0
    assert metrics["output_throughput_tok_s"] > 0 and metrics["ttft_ms_p50"] > 0 and metrics["ready_s"] > 0
    # Server side: what SGLang itself says it resolved (/server_info) and what its /metrics had.
    assert record["server"]["attention_backend"] == "torch_native"
    assert record["server"]["attention_backend_source"] == "server_info"
    assert metrics["accept_length_gauge"] is not None
    log = Path(record["server"]["log"]).read_text(errors="replace")
    assert "The server is fired up and ready to roll!" in log
    assert not _gone(out), "a process of SGLang's tree outlived the run"


def test_compare_passes_on_both_roles_and_every_page_says_what_the_build_is(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run(_harness("compare", str(TINY), "--cpu", "--trials", "1", out=out), cwd=REPO,
                          capture_output=True, text=True, timeout=2 * WAIT_S + 300)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "pass -> pass" in done.stdout and "verdict: every expectation held" in done.stdout
    assert f"before={SPEC} ({CPU_BUILD_LABEL})" in done.stderr
    [report] = out.glob("compare/*/report.json")
    data = json.loads(report.read_text())
    roles = data["cases"][0]["roles"]
    assert {r["label"] for r in roles} == {CPU_BUILD_LABEL} and {r["outcome"] for r in roles} == {"pass"}
    for page in ("report.md", "report.html"):
        text = (report.parent / page).read_text()
        assert CPU_BUILD_LABEL in text and CPU_BUILD_NOTICE.split("“")[0] in text
    assert not _gone(out)


def _under_way(logs: list[str], phase: str) -> bool:
    if phase == "start-up":  # SGLang's scheduler is up and loading, the ready line not yet written
        return any("Load weight begin" in text and READY_LINE not in text for text in logs)
    # The harness's own requests, after SGLang's ready line (its warm-up request comes before it).
    return any("POST /generate" in text.partition(READY_LINE)[2] for text in logs)


@pytest.mark.parametrize(("sig", "phase"), [(signal.SIGTERM, "workload"), (signal.SIGKILL, "workload"),
                                            (signal.SIGINT, "workload"), (signal.SIGINT, "start-up")],
                         ids=["TERM", "KILL", "INT", "INT-start-up"])
def test_a_signal_to_the_harness_leaves_no_process_of_sglangs_tree(tmp_path: Path, sig: int, phase: str) -> None:
    out = tmp_path / "out"
    # A workload long enough to be under way when the signal comes.
    argv = _harness("run", str(TINY), "--build", SPEC, "--set", "workload.requests=200", "--set",
                    "workload.max_new_tokens=64", out=out)
    harness = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and harness.poll() is None:
            if _under_way([p.read_text(errors="replace") for p in out.glob("**/server.log")], phase):
                break
            time.sleep(0.2 if phase == "start-up" else 0.5)
        else:
            pytest.fail(f"the real server never reached its {phase} (harness exit {harness.poll()})")
        tree = _tree(out)
        assert {"launcher", "sglang::scheduler"} <= _names(tree), _names(tree)
        if phase == "workload":
            assert "sglang::detokenizer" in _names(tree)
        harness.send_signal(sig)
        stdout, stderr = harness.communicate(timeout=120)
        left = _gone(out)
        assert not left, f"survived {signal.Signals(sig).name} of the harness: {_names(left)}"
        if sig != signal.SIGKILL:
            assert harness.returncode == 3, stdout + stderr[-2000:]
            [result] = out.glob("**/runs/*/result.json")
            record = json.loads(result.read_text())
            assert record["outcome"] == "interrupted" and record["build"]["label"] == CPU_BUILD_LABEL
            assert record["phase"] == phase, record["reason"]
            # The run's own log is there (SGLang's lines from its start), with its shutdown when it got that far.
            log = Path(record["server"]["log"]).read_text(errors="replace")
            assert "Load weight begin" in log
            if phase == "workload":  # SGLang's handler is installed by then: its drain line, or a SIGKILL after it
                assert "SIGTERM received" in log or record["server"]["teardown"]["killed"], log[-2000:]
    finally:
        if harness.poll() is None:
            harness.kill()
        for proc in _tree(out):
            proc.kill()


def test_a_killed_scheduler_ends_the_run_crashed_with_sglangs_own_lines(tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = _harness("run", str(TINY), "--build", SPEC, "--set", "workload.requests=200", "--set",
                    "workload.max_new_tokens=64", out=out)
    harness = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and harness.poll() is None:
            if _under_way([p.read_text(errors="replace") for p in out.glob("**/server.log")], "workload"):
                break
            time.sleep(0.5)
        [scheduler] = [p for p in _tree(out) if " ".join(p.cmdline()).startswith("sglang::scheduler")]
        scheduler.kill()  # SIGKILL: what the OOM killer does to it
        stdout, stderr = harness.communicate(timeout=300)
        assert harness.returncode == 1, stdout + stderr[-2000:]
        [result] = out.glob("**/runs/*/result.json")
        record = json.loads(result.read_text())
        assert (record["outcome"], record["phase"]) == ("crash", "workload"), record["reason"]
        log = Path(record["server"]["log"]).read_text(errors="replace")
        # SGLang's own account of it (0.5.21 srt/utils/watchdog.py:216-219, the launcher's child watchdog; the
        # contract's CHILD_CRASHED_LINE), kept with the run.
        assert "crashed with exit code -9. Triggering SIGQUIT for cleanup..." in log, log[-2000:]
        assert not _gone(out)
    finally:
        if harness.poll() is None:
            harness.kill()
        for proc in _tree(out):
            proc.kill()
