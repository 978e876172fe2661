"""Progress on a terminal (a pseudo-terminal here): one line redrawn with case k of N and the time left; plain
lines in a pipe or with --no-progress, so a CI log reads top to bottom."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

# A claim about the harness, not the model: its reference servers are the torch-free stand-in (tests/conftest.py).
pytestmark = pytest.mark.standin

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "fixtures" / "bisect" / "stale_out_cache_loc_tiny.yaml"
REDRAW = "\r\x1b[2K"

SHOW = """
import sys, time
from harness.util.progress import Progress
bar = Progress("compare", 3, plain={plain})
for k in range(3):
    time.sleep(0.05)
    bar.step()
    bar.show(f"case {{k + 1}} of 3", f"trial {{k}}: pass")
bar.finish()
print("done", file=sys.stderr)
"""


def _on_pty(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run ``argv`` with stdout and stderr on a pseudo-terminal; everything it wrote, and its exit status."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, cwd=REPO, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env,
                            start_new_session=True)
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child closed its side
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        rc = proc.wait(timeout=max(deadline - time.monotonic(), 1))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        os.close(master)
    return rc, out.decode("utf-8", "replace")


def test_a_terminal_gets_one_redrawn_line_with_case_k_of_n_and_time_left() -> None:
    rc, text = _on_pty([sys.executable, "-c", SHOW.format(plain=False)], timeout=60)
    assert rc == 0, text
    assert text.count(REDRAW) >= 3
    assert "compare: case 2 of 3 · 2 of 3 done" in text and "left" in text
    assert "\ncompare:" not in text.replace("\r\n", "\n").split("done\n")[0].lstrip("\n")  # never a new line each


def test_no_progress_means_plain_lines_even_on_a_terminal() -> None:
    rc, text = _on_pty([sys.executable, "-c", SHOW.format(plain=True)], timeout=60)
    assert rc == 0, text
    assert REDRAW not in text and "\x1b" not in text
    assert [line for line in text.replace("\r\n", "\n").splitlines() if line.startswith("compare:")] == [
        line for line in text.replace("\r\n", "\n").splitlines() if "of 3 done" in line] and text.count("of 3 done") == 3


def test_a_pipe_gets_plain_lines() -> None:
    res = subprocess.run([sys.executable, "-c", SHOW.format(plain=False)], cwd=REPO, capture_output=True, text=True,
                         timeout=60, check=True)
    assert "\x1b" not in res.stderr and res.stderr.count("\n") == 4


@pytest.mark.slow
def test_compare_on_a_terminal_shows_case_k_of_n_and_each_trial() -> None:
    """The real command on a pseudo-terminal: the progress line is redrawn; finished trials stay as lines."""
    env = {**os.environ, "SGLANG_REPRO_REPORTS": str(REPO / "reports")}
    rc, text = _on_pty([sys.executable, "-m", "harness", "compare", str(TINY), "--reference", "--trials", "1",
                        "--no-store"], timeout=400, env=env)
    assert rc == 0, text[-3000:]
    assert REDRAW in text and "compare: case 1 of 1 · 0 of 2 done" in text
    assert "before   trial 0: crash frozen-kv-mtp-stale-out-cache-loc" in text
    assert "crash -> pass" in text and "crash removed" in text


@pytest.mark.slow
def test_nightly_on_a_terminal_redraws_its_line_and_no_progress_prints_plain_lines(tmp_path: Path) -> None:
    """The same Progress through nightly: redrawn on a terminal, plain lines with --no-progress on the same one."""
    argv = [sys.executable, "-m", "harness", "nightly", str(TINY), "--build", "sim:post-fix", "--trials", "1",
            "--store", str(tmp_path / "s.db"), "--out", str(tmp_path / "out")]
    rc, text = _on_pty(argv, timeout=400)
    assert rc == 0, text[-3000:]
    assert REDRAW in text and "nightly: case 1 of 1" in text
    rc, text = _on_pty([*argv, "--no-progress"], timeout=400)
    assert rc == 0, text[-3000:]
    assert REDRAW not in text and "nightly: case 1 of 1" in text
