"""benchmarks/bench_under_load.py counts failures beside its burners, and leaves no burner behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_under_load.py"
BURN = "import os\nos.nice(5)\nwhile True:\n    pass\n"  # bench_under_load._BURN, the burner's whole program

pytestmark = pytest.mark.slow


def test_the_load_benchmark_counts_a_failure_and_a_pass_and_stops_its_burners(tmp_path: Path) -> None:
    tests = tmp_path / "test_planted.py"
    tests.write_text("def test_holds():\n    assert True\n\n\ndef test_breaks():\n    assert False\n")
    out = tmp_path / "under-load.json"
    done = subprocess.run([sys.executable, str(BENCH), "--rounds", "2", "--burners", "1", "--timeout-s", "120",
                           "--out", str(out), str(tests)], capture_output=True, text=True, timeout=300, check=False)
    result = json.loads(done.stdout)
    assert done.returncode == 1, done.stderr
    assert json.loads(out.read_text()) == result
    # each round's whole output beside --out, as a round of --suite keeps its `make test` log
    for n in (1, 2):
        log = (tmp_path / f"under-load.round{n}.log").read_text()
        assert "FAILED" in log and "test_breaks" in log and "1 passed" in log, log[-500:]
    assert result["failures"] == 2 and result["rounds_clean"] == 0 and result["burners"] == 1
    assert [[t.rsplit("/", 1)[-1] for t in r["failed"]] for r in result["rounds"]] == [["test_planted.py::test_breaks"]] * 2
    assert len(result["burner_pids"]) == 1
    # Only the benchmark's own burners, by pid and by their program: another test on another xdist worker may
    # run a loop of its own (CI once saw a bash with "while True" in its argv here).
    burning = []
    for pid in result["burner_pids"]:
        try:
            argv = psutil.Process(pid).cmdline()
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        if BURN in argv:
            burning.append(pid)
    assert not burning, f"a burner outlived the benchmark: {burning}"
