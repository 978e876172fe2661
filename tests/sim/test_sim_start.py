"""The reference server's processes load only their own stacks: the front never maps torch, the
scheduler child never maps aiohttp (it used to re-import the front's HTTP stack when spawned).

Observed on the running processes' memory maps (``/proc/PID/maps``), not on the code.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import SimServer
from tests.sim.sim_helpers import EAGER_28264

pytestmark = pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc (Linux)")


def _mapped(pid: int) -> set[str]:
    return {line.split()[-1] for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
            if len(line.split()) >= 6}


def _maps_torch(paths: set[str]) -> bool:
    return any("/torch/lib/libtorch" in p for p in paths)


def _maps_aiohttp(paths: set[str]) -> bool:
    return any("/aiohttp/" in p for p in paths)


def test_front_serves_http_without_torch_and_the_scheduler_runs_torch_without_aiohttp(sim_server) -> None:
    server: SimServer = sim_server([*EAGER_28264, "--sim-revision", "post-fix"])
    assert server.get("/health")[0] == 200
    front, *children = server.tree_pids()
    front_maps = _mapped(front)
    assert _maps_aiohttp(front_maps) and not _maps_torch(front_maps)
    schedulers = [pid for pid in children if _maps_torch(_mapped(pid))]
    assert len(schedulers) == 1, f"children {children}: expected one scheduler with torch"
    assert not _maps_aiohttp(_mapped(schedulers[0]))
