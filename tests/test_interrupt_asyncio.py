"""SIGTERM inside a running event loop ends it as Ctrl-C does, without a stray traceback (interrupts).

CI saw an interrupted ``compare`` print "Task exception was never retrieved" and a traceback: the SIGTERM
handler raised KeyboardInterrupt in whatever ran, here an aiohttp task writing a request body, and asyncio
logged that task's exception when it was collected. asyncio's Runner takes SIGINT by cancelling its main
task and raising once the loop is done; ``sigterm_as_ctrl_c`` now hands SIGTERM to that handler whenever
a Runner holds SIGINT. The child keeps the loop busy in worker tasks, so a signal lands in one of them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

_CHILD = """
import asyncio, os, signal, sys, threading
from harness.interrupts import sigterm_as_ctrl_c

async def worker():
    while True:
        sum(range(20000))  # busy between awaits, as a request writer is: the signal lands in a task
        await asyncio.sleep(0)

async def main():
    await asyncio.gather(*(worker() for _ in range(4)))

def plain(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")

threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM)).start()
try:
    if sys.argv[1] == "plain":
        signal.signal(signal.SIGTERM, plain)
        asyncio.run(main())
    else:
        with sigterm_as_ctrl_c():
            asyncio.run(main())
except KeyboardInterrupt:
    print("interrupted")
"""


def _child(how: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _CHILD, how], cwd=REPO, capture_output=True, text=True,
                          timeout=60)


def test_a_plain_raising_handler_leaves_a_task_traceback() -> None:
    """The window is real: raised in a task, the interrupt is logged as a never-retrieved task exception."""
    done = _child("plain")
    assert "interrupted" in done.stdout
    assert "Task exception was never retrieved" in done.stderr


@pytest.mark.parametrize("attempt", range(3))
def test_sigterm_in_a_running_loop_interrupts_cleanly(attempt: int) -> None:
    done = _child("shielded")
    assert done.returncode == 0 and "interrupted" in done.stdout, done.stderr
    assert "Traceback" not in done.stderr and "never retrieved" not in done.stderr, done.stderr
