"""The small public API on ``harness`` for scripts (issue 44): load a scenario, run a case, open a store.

One real run on the reference server's stand-in scheduler (``sim:post-fix,scheduler=standin``), recorded in a
fresh SQLite store through ``run_case(..., store=...)`` and read back through ``open_store``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import harness
from harness.records.outcome import Outcome

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"

pytestmark = pytest.mark.standin


def test_a_scenario_is_run_recorded_and_read_back(tmp_path: Path) -> None:
    loaded = harness.load_scenario(SEED)
    (case,) = [c for c in loaded.cases if c.name == "tokens=276,path=eager"]
    db = tmp_path / "results.db"
    record = harness.run_case(case, "sim:post-fix,scheduler=standin", out_root=tmp_path / "out", store=str(db))
    assert record.outcome is Outcome.PASS, record.reason
    assert (Path(record.artifacts) / "result.json").is_file()
    with harness.open_store(str(db)) as store:
        stored = store.records()
    assert [r.run_id for r in stored] == [record.run_id]
    assert stored[0].outcome is Outcome.PASS and stored[0].build.spec == "sim:post-fix,scheduler=standin"
    assert stored[0].case.name == case.name


def test_a_bad_scenario_is_named_by_file_and_line(tmp_path: Path) -> None:
    from harness.scenario import ScenarioError

    bad = tmp_path / "bad.yaml"
    bad.write_text(SEED.read_text(encoding="utf-8").replace("name:", "nmae:", 1), encoding="utf-8")
    with pytest.raises(ScenarioError, match=r"bad\.yaml:\d+"):
        harness.load_scenario(bad)


def test_importing_harness_imports_none_of_its_modules() -> None:
    code = "import sys, harness\nprint(sorted(m for m in sys.modules if m.startswith('harness.')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO,
                          check=True)
    assert done.stdout.strip() == "[]"
    assert sorted(harness.__all__) == ["__version__", "load_scenario", "open_store", "run_case"]
