"""Issue 49: an incident's ``next:`` gives the night's ``--set`` overrides again (it dropped them: run as printed,
the case passed where the night had failed), on SQLite and PostgreSQL, secrets as ``${VAR}`` references."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from harness.series.points import case_points, stored_case_points
from harness.store import migrations
from harness.store.schema import RUN_KINDS
from harness.store.store import new_batch, open_store
from harness.store.url import store_url as parse_store_url
from tests.helpers import make_record

pytestmark = pytest.mark.standin

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"
# The graph path passes on the pre-fix build; the night turned CUDA graphs off (--set), which takes the eager path:
# a crash there, a pass without the override.
CASE = "tokens=276,path=graph"
EAGER = "server.args.disable-cuda-graph=true"
TOKEN = "hf_nightsetsecret0123456789abcdef"


def _cli(*args: str, cwd: Path, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=timeout, check=False)


def _next_line(text: str) -> str:
    lines = [ln.strip().removeprefix("next: ") for ln in text.splitlines() if ln.strip().startswith("next: ")]
    assert len(lines) == 1, text
    return lines[0]


@pytest.mark.slow
def test_the_next_step_of_a_night_with_overrides_reproduces_its_failure(store_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "HF_TOKEN": TOKEN, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(REPO)}
    night = _cli("nightly", str(SCENARIO), "--case", CASE, "--build", "sim:pre-fix", "--trials", "1", "--store",
                 store_url, "--out", str(tmp_path / "night"), "--no-progress", "--set", EAGER, "--set",
                 f"server.env.HF_TOKEN={TOKEN}", cwd=tmp_path, env=env)
    assert night.returncode == 1, night.stdout + night.stderr
    printed = _next_line(night.stdout)
    assert f"--set {EAGER}" in printed and '--set "server.env.HF_TOKEN=${HF_TOKEN}"' in printed, printed
    assert TOKEN not in night.stdout + night.stderr
    stored = _cli("store", "alerts", "--store", store_url, cwd=tmp_path, env=env, timeout=60)
    assert _next_line(stored.stdout) == printed, stored.stdout + stored.stderr  # `store alerts` reads the row
    assert printed.startswith("sglang-repro run ")

    # Run as printed, by a shell (the reference gets the user's own HF_TOKEN): the night's crash again.
    again = subprocess.run(["bash", "-c", printed + " --no-store --out out"], capture_output=True, text=True,
                           cwd=tmp_path, env=env, timeout=300, check=False)
    assert again.returncode == 1 and "CRASH" in again.stdout, again.stdout + again.stderr
    # What the line printed before the fix (no overrides): the case passes, the failure is not reproduced.
    without = printed.split(" --set ")[0]
    passed = subprocess.run(["bash", "-c", without + " --no-store --out out"], capture_output=True, text=True,
                            cwd=tmp_path, env=env, timeout=300, check=False)
    assert passed.returncode == 0 and "PASS" in passed.stdout, passed.stdout + passed.stderr


def test_a_store_of_version_8_gains_the_runs_overrides_and_reads_its_old_runs(store_url: str) -> None:
    from tests.store.test_store import _record_as_version

    engine = create_engine(parse_store_url(store_url))
    assert migrations.migrate(engine, target=8) == 8
    engine.dispose()
    old = make_record(run_id="old", spec="sim:pre-fix", started_at="2026-11-01T02:00:00+00:00")
    _record_as_version(store_url, [(old, new_batch("nightly", "n1", started_at="2026-11-01T02:00:00+00:00"))])
    with open_store(store_url) as store:  # migrated to 9 on open
        now = make_record(run_id="new", spec="sim:pre-fix", started_at="2026-11-02T02:00:00+00:00")
        now = dataclasses.replace(now, scenario=dataclasses.replace(now.scenario, sets=(EAGER, "server.env.X=${X}")))
        store.record(now, new_batch("nightly", "n2", started_at="2026-11-02T02:00:00+00:00"))
        (cp,) = stored_case_points(store, kinds=RUN_KINDS)  # the old run was written as a one-off run
        assert [p.sets for p in cp.points] == [(), (EAGER, "server.env.X=${X}")]
        (framed,) = case_points(store.runs_frame(), store.metrics_frame(), RUN_KINDS)  # the frames' read agrees
        assert [p.sets for p in framed.points] == [(), (EAGER, "server.env.X=${X}")]
