"""A signal after the command has returned cannot change how the process ends (cli.entry).

Python's finalization resets Python-level signal handlers to SIG_DFL, so a second Ctrl-C that landed
after an interrupted command had written its record killed the process by SIGINT (exit -2) instead of the
exit code the command had decided. These tests hold each window of the exit open on purpose (a slow exit
handler, a slow object finalized with the modules) and signal into it: without ``entry`` they die by the
signal (the first test shows the window is real), with it they end with the command's code.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCENARIO = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"

# The child runs `validate SCENARIO` through the given entry, with a slow stretch in the named window of
# the exit; it says "window" on stderr when the stretch begins.
_CHILD = """
import atexit, sys, time
import harness.cli as cli
window, how = sys.argv[1], sys.argv[2]

def slow():
    print("window", file=sys.stderr, flush=True)
    time.sleep(5)

class Slow:
    def __del__(self):
        slow()

real_main = cli.main
def main(argv=None):
    code = real_main(["validate", sys.argv[3]])
    if window == "atexit":
        atexit.register(slow)  # registered during the command, as a library's would be
    else:
        import builtins
        builtins._slow_at_teardown = Slow()  # finalized with the modules, after the signal module's reset
    return code

cli.main = main
if how == "entry":
    cli.entry()
raise SystemExit(main())
"""


def _signal_in_window(window: str, how: str, sig: int) -> subprocess.CompletedProcess[str]:
    child = subprocess.Popen([sys.executable, "-c", _CHILD, window, how, str(SCENARIO)], cwd=REPO,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stderr is not None
        line = child.stderr.readline()
        assert line.strip() == "window", line
        child.send_signal(sig)
        stdout, stderr = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    return subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)


def test_without_entry_a_signal_at_module_teardown_kills_the_process() -> None:
    ended = _signal_in_window("teardown", "main", signal.SIGINT)
    assert ended.returncode == -signal.SIGINT, (ended.returncode, ended.stderr[-2000:])


@pytest.mark.parametrize("window", ["atexit", "teardown"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_a_signal_after_the_command_returned_keeps_its_exit_code(window: str, sig: int) -> None:
    ended = _signal_in_window(window, "entry", sig)
    assert ended.returncode == 0, (ended.returncode, ended.stderr[-2000:])
    assert "Traceback" not in ended.stderr, ended.stderr
    assert "1 file(s) valid" in ended.stdout, f"validate's output was lost: {ended.stdout!r}"
