"""``sglang-repro triage`` as a real subprocess over fixture logs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "fixtures" / "logs"

pytestmark = pytest.mark.slow


def triage(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", "triage", *map(str, args)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )


def test_one_line_per_file_and_bug_exit_code() -> None:
    logs = [LOGS / n for n in ("frozen_kv_mtp_271.log", "cuda_oom.log", "unrelated_broadcast.log", "clean.log")]
    proc = triage(*logs)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines() == [
        f"{logs[0]}: frozen-kv-mtp-stale-out-cache-loc (bug) "
        "Frozen-KV MTP eager draft reuses the prefill's out_cache_loc (broadcast shape [N])",
        f"{logs[1]}: cuda-out-of-memory (bug) CUDA out of memory",
        f"{logs[2]}: none",
        f"{logs[3]}: none",
    ]
    assert proc.stderr == ""


def test_nothing_matched_exits_zero() -> None:
    proc = triage(LOGS / "clean.log", LOGS / "unrelated_broadcast.log")
    assert proc.returncode == 0, proc.stderr
    assert [line.split(": ", 1)[1] for line in proc.stdout.splitlines()] == ["none", "none"]


def test_only_infra_exits_three() -> None:
    proc = triage(LOGS / "no_accelerator.log", LOGS / "clean.log")
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.splitlines()[0].endswith("no-accelerator (infra) No accelerator available")


def test_missing_file_is_bad_input_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "absent.log"
    proc = triage(LOGS / "clean.log", missing)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.strip() == f"sglang-repro: {missing}: no such log file"


def test_custom_catalogue_and_bad_catalogue(tmp_path: Path) -> None:
    good = tmp_path / "cat.yaml"
    good.write_text(
        "version: 1\nsignatures:\n  - id: ready\n    title: Ready\n    kind: infra\n    upstream: []\n"
        "    message: fired up and ready to roll\n"
    )
    proc = triage("--catalogue", good, LOGS / "clean.log")
    assert proc.returncode == 3 and proc.stdout.strip() == f"{LOGS / 'clean.log'}: ready (infra) Ready"

    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text().replace("fired up", "fired (up"))
    proc = triage("--catalogue", bad, LOGS / "clean.log")
    assert proc.returncode == 2
    assert f"{bad}:3: signature 'ready': message: bad regex" in proc.stderr


def test_excerpt_shows_the_traceback() -> None:
    proc = triage("--excerpt", LOGS / "sim_pre_fix_eager.log")
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert lines[1] == "  line 23:"
    assert "harness/sim/cuda_graph_buffer_registry.py" in proc.stdout
    assert lines[-1].endswith("RuntimeError: output with shape [1] doesn't match the broadcast shape [276]")
