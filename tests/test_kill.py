"""harness.util.kill.dies_with_parent: a child started with it ends when the process that started it is SIGKILLed
(no teardown runs), as the harness's servers and the tests' own servers (tests.helpers.start_server) do."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tests.helpers import REPO

_PARENT = """
import os, subprocess, sys, time
from harness.util.kill import dies_with_parent
child = subprocess.Popen(["sleep", "600"], start_new_session=True,
                         preexec_fn=dies_with_parent(os.getpid()) if sys.argv[1] == "yes" else None)
print(child.pid, flush=True)
time.sleep(600)
"""


def _orphan_after_parent_is_killed(use_it: str) -> bool:
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, use_it], cwd=REPO, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    assert parent.stdout is not None
    child = psutil.Process(int(parent.stdout.readline()))
    try:
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if not child.is_running() or child.status() == psutil.STATUS_ZOMBIE:
                return False
            time.sleep(0.05)
        return True
    finally:
        if child.is_running():
            child.kill()


@pytest.mark.parametrize("use_it", ["yes", "no"])
def test_a_child_started_with_it_ends_with_its_killed_parent_and_one_without_it_does_not(use_it: str) -> None:
    assert _orphan_after_parent_is_killed(use_it) is (use_it == "no")
