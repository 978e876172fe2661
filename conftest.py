"""Refuses a ``--dist loadgroup`` run on a pytest whose node ids drop pytest-xdist's groups. The sglang-repro pytest
plugin (scenario files under scenarios/ become test items) is registered by the package's ``pytest11`` entry point,
here as in any repository where the package is installed."""

from __future__ import annotations

import signal
from importlib.metadata import version

import pytest

# make test runs `-n 3 --dist loadgroup`: the SLURM tests share one cluster and the bisect searches one history,
# each group on one worker. pytest-xdist (up to 3.8) marks a grouped item by writing "GROUP" into its node id
# (item._nodeid, xdist/remote.py); pytest 9.2 builds node ids from a structured id and ignores that write
# (pytest-xdist#1386, fix proposed in #1388), so the groups vanish without a word and grouped tests run side by
# side. Seen here: two tests of one group on gw0 and gw1 under pytest 9.2.0, on one worker under 9.1.1.
_LOADGROUP_BROKEN = ((9, 2), (3, 9))  # from this pytest on, before this pytest-xdist


def _release(name: str) -> tuple[int, int]:
    major, minor = (int("".join(c for c in part if c.isdigit()) or 0) for part in version(name).split(".")[:2])
    return major, minor


def pytest_configure(config: pytest.Config) -> None:
    # A suite started as a background job of a non-interactive shell (`.ci/run &`, nohup) inherits SIGINT ignored,
    # and so would every harness process it starts: Python installs no KeyboardInterrupt handler then, and every
    # Ctrl-C test sends a signal nobody hears (a run of 22 such failures, all INT, none TERM). The tests are about a
    # terminal's Ctrl-C, which is never ignored; a handler here is reset to the default in each child at exec.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if hasattr(config, "workerinput") or getattr(config.option, "dist", "no") != "loadgroup":
        return
    pytest_from, xdist_before = _LOADGROUP_BROKEN
    if _release("pytest") >= pytest_from and _release("pytest-xdist") < xdist_before:
        raise pytest.UsageError(
            f"--dist loadgroup does not group with pytest {version('pytest')} and pytest-xdist "
            f"{version('pytest-xdist')} (pytest-xdist#1386): install the pytest of .ci/constraints.txt (make install)")
