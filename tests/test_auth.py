"""A scenario with --api-key: the reference server refuses requests without it, as SGLang does, and the
harness's own requests (workload, server info, cache flush between shared trials) carry it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness.pipeline import RunOptions, execute_run
from harness.records.outcome import Outcome
from harness.scenario import load_file, select_cases
from harness.server import http
from harness.server.auth import admin_headers, request_headers
from harness.server.pool import ServerPool

REPO = Path(__file__).resolve().parent.parent
LONG = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"
KEY = "sk-test-key-0123456789"

# A claim about the harness, not the model: its reference servers are the torch-free stand-in (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.standin]


def test_headers_come_from_the_scenario_flags() -> None:
    assert request_headers({"api-key": KEY}) == {"Authorization": f"Bearer {KEY}"}
    assert admin_headers({"api-key": KEY, "admin-api-key": "adm"}) == {"Authorization": "Bearer adm"}
    assert request_headers({}) == {} == admin_headers({"api-key": None})


def test_runs_against_a_server_with_an_api_key(tmp_path: Path) -> None:
    (case,) = select_cases(load_file(LONG), "tokens=276,path=graph")
    sc = case.scenario
    # decode-log-interval 1: the server folds its acceptance length every decode batch, so /server_info has one
    server = sc.server.model_copy(update={"args": {**sc.server.args, "api-key": KEY, "decode-log-interval": 1}})
    case = replace(case, scenario=sc.model_copy(update={"server": server}), reference_scenario=None)
    opts = RunOptions(out_root=tmp_path, progress=False)
    with ServerPool(tmp_path) as pool:
        first = execute_run(case, "sim:post-fix", trial=0, options=opts, pool=pool)
        live = next(iter(pool._live.values()))
        url = live.server.url
        assert http.get(f"{url}/server_info", timeout_s=5).status == 401
        assert http.get(f"{url}/health", timeout_s=30).status == 200
        assert http.get(f"{url}/server_info", timeout_s=5, headers=request_headers({"api-key": KEY})).status == 200
        second = execute_run(case, "sim:post-fix", trial=1, options=opts, pool=pool)
    assert first.outcome is Outcome.PASS and second.outcome is Outcome.PASS, (first.reason, second.reason)
    assert second.metric("accept_length_server") is not None  # /server_info answered the harness
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path
