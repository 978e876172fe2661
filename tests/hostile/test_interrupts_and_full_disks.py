"""Issue 37, interrupts and full disks: what finished is kept and said (compare's PARTIAL report, nightly's
summary, exit 3, never 130 once a record is kept, no traceback), and a full disk under --out ends the command
in one line, exit 3, with the run's complete record still in a healthy store."""

from __future__ import annotations

import os
import re
import select
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hostile._probe import CASE, REPO, SEED

# A claim about the harness, not the model: its reference servers are the torch-free stand-in (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.standin]


def _start(argv: list[str], python: tuple[str, ...] = ()) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, *python, "-m", "harness", *argv], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _signal_after(proc: subprocess.Popen[str], marker: str, count: int, sig: int = signal.SIGINT,
                  times: int = 1) -> list[str]:
    """Read stderr until ``marker`` appeared ``count`` times, then send ``sig`` ``times`` times; the lines read."""
    assert proc.stderr is not None
    lines: list[str] = []
    seen = 0
    deadline = time.monotonic() + 300
    while seen < count and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        seen += marker in line
    assert seen == count, "".join(lines)
    for _ in range(times):
        proc.send_signal(sig)
        time.sleep(0.05)
    return lines


def _rows(db: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(db)
    try:
        return list(conn.execute("SELECT run_id, outcome FROM runs"))
    finally:
        conn.close()


def test_compare_interrupted_right_after_its_last_run_writes_a_partial_report_and_exits_3(tmp_path: Path) -> None:
    proc = _start(["compare", str(SEED), "--case", CASE, "--before", "sim:pre-fix", "--after", "sim:post-fix",
                   "--trials", "1", "--out", str(tmp_path / "o"), "--store", str(tmp_path / "s.db")])
    _signal_after(proc, "trial 0:", 2)  # the second role's result line: the last run of the comparison
    out, err = proc.communicate(timeout=240)
    assert "Traceback" not in err, err
    assert proc.returncode == 3, (proc.returncode, out, err)
    assert "PARTIAL" in out and "report:" in out, out
    [report] = list((tmp_path / "o" / "compare").glob("*/report.html"))
    assert "PARTIAL" in report.read_text()
    assert "&#10004;" not in report.read_text() and "✔" not in report.read_text()  # no check mark on a PARTIAL
    assert len(_rows(tmp_path / "s.db")) == 2


@pytest.mark.parametrize("times", [1, 2])
def test_nightly_interrupted_while_detecting_exits_3_with_its_summary(tmp_path: Path, times: int) -> None:
    proc = _start(["nightly", str(SEED), "--case", CASE, "--build", "sim:post-fix", "--trials", "1",
                   "--no-progress", "--out", str(tmp_path / "o"), "--store", str(tmp_path / "s.db")])
    _signal_after(proc, "now: detecting", 1, times=times)
    out, err = proc.communicate(timeout=240)
    assert "Traceback" not in err and "Exception closing" not in err, err
    assert proc.returncode == 3, (proc.returncode, out, err)
    assert "interrupted" in out and "1 pass" in out, out
    assert [o for _, o in _rows(tmp_path / "s.db")] == ["pass"]


# A line of ``-X importtime`` for a module under harness/ other than the package itself: harness/__init__.py imports
# nothing, and runpy loads __main__.py's code without an import, so the first such line is printed from inside
# harness/__main__.py's guard, while `from harness.cli import entry` is still importing.
_INSIDE_THE_GUARD = re.compile(rb"^import time:.*\|\s+harness\.\S+$", re.M)


def _read_until_inside_the_guard(proc: subprocess.Popen[str], timeout_s: float) -> bytes:
    """stderr up to the first import under harness/ (read from the descriptor: nothing is left in a buffer that
    ``communicate`` would not see)."""
    assert proc.stderr is not None
    fd, seen = proc.stderr.fileno(), b""
    deadline = time.monotonic() + timeout_s
    while not _INSIDE_THE_GUARD.search(seen) and time.monotonic() < deadline:
        if select.select([fd], [], [], 0.5)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            seen += chunk
    return seen


def test_a_signal_while_the_command_imports_is_exit_130_without_a_traceback(tmp_path: Path) -> None:
    # Before harness/__main__.py runs, a SIGINT is Python's own: in its start-up, before the handler, it kills the
    # program (-2); in site, which imports pathlib and urllib for the editable install's finder, it is a "Fatal
    # Python error: init_import_site" with a traceback, for any program. Neither is the harness's window, and beside
    # two CPU burners a signal timed from the spawn (0.8 s) or from the handler's installation (+0.3 s) landed in
    # each. So the signal is sent once -X importtime shows a module under harness/ imported: the import of
    # harness.cli has ~0.6 CPU-s left, so it lands there (130) or in the run (3).
    proc = _start(["compare", str(SEED), "--case", CASE, "--before", "sim:pre-fix", "--after", "sim:post-fix",
                   "--out", str(tmp_path / "o"), "--no-store"], python=("-X", "importtime"))
    seen = _read_until_inside_the_guard(proc, timeout_s=60)
    assert _INSIDE_THE_GUARD.search(seen), seen.decode(errors="replace")[-2000:]
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    err = seen.decode(errors="replace") + err
    assert "Traceback" not in err, err[-4000:]
    assert proc.returncode in (130, 3), (proc.returncode, err[-4000:])


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 200 KiB tmpfs left with 32 KiB free (root only; skipped where mount is not allowed)."""
    mount = tmp_path / "full"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(mount)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()[:100]}")
    try:
        (mount / "filler").write_bytes(b"\0" * 170_000)
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_under_out_is_one_line_exit_3_and_the_record_reaches_the_healthy_store(
        tmp_path: Path, full_disk: Path) -> None:
    healthy = tmp_path / "healthy"
    healthy.mkdir()
    done = subprocess.run([sys.executable, "-m", "harness", "run", str(SEED), "--case", CASE, "--build",
                           "sim:post-fix", "--out", str(full_disk / "o"), "--store", str(healthy / "s.db"),
                           "--no-progress"], cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 3, (done.returncode, done.stdout, done.stderr)
    [line] = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert "no space left on the device" in line, line
    assert [o for _, o in _rows(healthy / "s.db")] == ["pass"]


def test_export_and_dashboard_onto_a_full_disk_are_one_line_exit_3(tmp_path: Path, full_disk: Path) -> None:
    from harness.store.store import open_store
    from tests.helpers import make_record

    store = tmp_path / "s.db"
    with open_store(str(store)) as opened:
        from harness.store.store import new_batch

        opened.record(make_record(run_id="r1"), new_batch("import"))
    with open(full_disk / "more", "wb", buffering=0) as fh:  # the rest of the disk, to the last block
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError:
            pass
    for argv in (["store", "export", "--store", str(store), "--format", "csv", "-o", str(full_disk / "x.csv")],
                 ["store", "export", "--store", str(store), "--format", "parquet", "-o", str(full_disk / "x.pq")],
                 ["dashboard", "--store", str(store), "-o", str(full_disk / "d")]):
        done = subprocess.run([sys.executable, "-m", "harness", *argv], cwd=REPO, capture_output=True, text=True,
                              timeout=120, check=False)
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        assert done.returncode == 3 and len(lines) == 1 and "no space left" in lines[0], (argv, done.stderr)


def test_run_interrupted_after_its_record_is_kept_exits_3_not_130(tmp_path: Path) -> None:
    proc = _start(["run", str(SEED), "--case", CASE, "--build", "sim:post-fix", "--trials", "1", "--no-progress",
                   "--out", str(tmp_path / "o"), "--store", str(tmp_path / "s.db")])
    assert proc.stdout is not None
    first = proc.stdout.readline()  # the run's result line: its record is written, its row on the way
    assert first.startswith("PASS"), first
    proc.send_signal(signal.SIGINT)
    time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=240)
    assert "Traceback" not in err, err
    assert proc.returncode in (0, 3), (proc.returncode, err)  # 0 only when it had ended before the signals
    assert [o for _, o in _rows(tmp_path / "s.db")] == ["pass"]
