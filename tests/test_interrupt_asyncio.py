"""SIGTERM inside a running event loop ends it as Ctrl-C does, without a stray traceback (interrupts).

CI saw an interrupted ``compare`` print "Task exception was never retrieved" and a traceback: the SIGTERM
handler raised KeyboardInterrupt in whatever ran, here an aiohttp task writing a request body, and asyncio
logged that task's exception when it was collected. asyncio's Runner takes SIGINT by cancelling its main
task and raising once the loop is done; ``sigterm_as_ctrl_c`` now hands SIGTERM to that handler whenever
a Runner holds SIGINT. The child keeps its loop busy in worker tasks, so a signal lands in one of them,
and runs several loops in a row; the test signals each once it is running.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ATTEMPTS = 6

_CHILD = """
import asyncio, gc, signal, sys
from harness.util.interrupts import sigterm_as_ctrl_c

async def worker():
    while True:
        sum(range(20000))  # busy between awaits, as a request writer is: the signal lands in a task
        await asyncio.sleep(0)

async def main():
    print("running", flush=True)
    await asyncio.gather(*(worker() for _ in range(4)))

def plain(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")

for _ in range(int(sys.argv[2])):
    try:
        if sys.argv[1] == "plain":
            signal.signal(signal.SIGTERM, plain)
            asyncio.run(main())
        else:
            with sigterm_as_ctrl_c():
                asyncio.run(main())
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    gc.collect()  # a task's never-retrieved exception is logged when the task is collected
"""


READ_S = 60.0  # a loop that does not end after its signal is a verdict here, never a wait without end


class _Lines:
    """The child's stdout read line by line from its descriptor (no buffer that select cannot see), each line
    waited for at most READ_S: "" when none came (the child hung)."""

    def __init__(self, fd: int) -> None:
        self.fd, self.buf = fd, b""

    def next(self) -> str:
        deadline = time.monotonic() + READ_S
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return ""
            chunk = os.read(self.fd, 4096)
            if not chunk:
                return ""
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode().strip()


def _interrupted(how: str) -> tuple[list[str], str]:
    """The child's stdout lines and stderr after each of its loops got one SIGTERM; a loop that neither
    printed nor ended within READ_S stops the child, its line left empty."""
    child = subprocess.Popen([sys.executable, "-c", _CHILD, how, str(ATTEMPTS)], cwd=REPO,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout is not None
    out = _Lines(child.stdout.fileno())
    lines: list[str] = []
    try:
        for _ in range(ATTEMPTS):
            lines.append(out.next())
            time.sleep(0.2)
            child.send_signal(signal.SIGTERM)
            lines.append(out.next())
            if not lines[-1]:
                child.kill()
                break
        _, stderr = child.communicate(timeout=60)
    finally:
        child.kill()
        child.wait(timeout=60)
    return lines, stderr.decode(errors="replace")


def test_a_plain_raising_handler_leaves_a_task_traceback() -> None:
    """The window is real: raised in a task, the interrupt is logged as a never-retrieved task exception."""
    lines, stderr = _interrupted("plain")
    # Raised in a task, the interrupt is logged as a never-retrieved task exception; or, as CI once saw, it
    # lands in the loop's own machinery and the loop never ends (the child stopped after READ_S). Both are
    # the window sigterm_as_ctrl_c closes.
    hung = "" in lines
    assert hung or lines == ["running", "interrupted"] * ATTEMPTS, lines
    assert hung or "Task exception was never retrieved" in stderr


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.Runner (and its SIGINT handling) is 3.11+")
def test_sigterm_in_a_running_loop_interrupts_cleanly() -> None:
    lines, stderr = _interrupted("shielded")
    assert lines == ["running", "interrupted"] * ATTEMPTS, stderr
    assert "Traceback" not in stderr and "never retrieved" not in stderr, stderr
