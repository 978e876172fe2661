"""A command that only reads (``Command.reads_only``) is spared the interpreter's last collection, only as a process.

``harness.cli.entry`` keeps the cyclic collector off while such a command runs (all it builds it keeps until it
exits) and freezes it after: nothing of it holds a buffered file or a child in a cycle. ``main``, which tests and
other callers run in their own process, never touches it.
"""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main

REPO = Path(__file__).resolve().parents[1]
SEED = REPO / "scenarios" / "frozen_kv_mtp" / "accept_length_guard.yaml"
_PROBE = ("import atexit, gc, sys\n"
          "import harness.cli as cli\n"
          "atexit.register(lambda: print(('frozen' if gc.get_freeze_count() else 'not frozen')\n"
          "                              + (', collector on' if gc.isenabled() else ', collector off')))\n"
          "sys.argv = ['sglang-repro', *sys.argv[1:]]\n"
          "cli.entry()\n")


def test_main_in_a_callers_process_leaves_its_collector_alone() -> None:
    before = gc.get_freeze_count()
    assert main(["validate", str(SEED)]) == 0
    assert gc.get_freeze_count() == before and gc.isenabled()


@pytest.mark.parametrize(("args", "expected"), [(["validate", str(SEED)], "frozen, collector off"),
                                                (["list", str(SEED)], "not frozen, collector on")])
def test_only_a_reading_command_run_as_the_process_is_frozen_at_its_exit(args: list[str], expected: str) -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == expected
