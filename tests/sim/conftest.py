"""Fixtures for the reference server's tests: real server processes on 127.0.0.1, always torn down."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import SimServer, start_server, stop_server
from tests.sim.sim_helpers import GRAPH_28264


@pytest.fixture
def sim_server(tmp_path: Path) -> Iterator:
    """Factory: ``sim_server(args, wait_ready=True)``; every server it starts is killed at teardown."""
    started: list[SimServer] = []

    def factory(args: list[str], wait_ready: bool = True) -> SimServer:
        server = start_server(args, tmp_path / f"server{len(started)}.log", wait_ready)
        started.append(server)
        return server

    yield factory
    for server in started:
        stop_server(server)


@pytest.fixture(scope="module")
def post_fix_graph_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimServer]:
    """One post-fix graph-path server with metrics, shared by the endpoint tests of a module."""
    log = tmp_path_factory.mktemp("sim") / "server.log"
    server = start_server([*GRAPH_28264, "--enable-metrics", "--sim-revision", "post-fix",
                           "--max-running-requests", "8"], log)
    yield server
    stop_server(server)
