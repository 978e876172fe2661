"""`sglang-repro metrics RUN_DIR` on a real run's artifacts: the same numbers as its result.json, exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# A claim about the harness, not the model: its reference servers are the torch-free stand-in (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.standin]


def test_metrics_command_recomputes_a_runs_numbers_exactly(tmp_path: Path, run_cli) -> None:
    import yaml

    from harness.pipeline import RunOptions, execute_run
    from harness.scenario import load_file, select_cases

    seed = Path(__file__).resolve().parent.parent / "scenarios/frozen_kv_mtp/long_prompt_stale_out_cache_loc.yaml"
    data = yaml.safe_load(seed.read_text())
    data["matrix"]["tokens"] = {"24": {"workload.prompt.tokens": 24}}  # a light version: short prompts, 3 requests
    data["workload"].update(requests=3, max_new_tokens=12, concurrency=2)
    scenario = tmp_path / "light.yaml"
    scenario.write_text(yaml.safe_dump(data))
    (case,) = select_cases(load_file(scenario), "tokens=24,path=graph")
    result = execute_run(case, "sim:post-fix", options=RunOptions(out_root=tmp_path, progress=False))
    assert result.outcome == "pass", result.reason
    res = run_cli("metrics", result.artifacts)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "0 figure(s) differ" in res.stdout and "manifest: closed loop" in res.stdout
    from harness.measure.server_side import recompute  # the work, callable without argparse
    from harness.util.errors import UserError

    out = recompute(Path(result.artifacts))
    assert out.differs == {}
    assert out.metrics["output_throughput_tok_s"] == result.metrics["output_throughput_tok_s"]
    # A tampered figure is caught, and named.
    path = Path(result.artifacts) / "result.json"
    data = json.loads(path.read_text())
    data["metrics"]["itl_ms_p50"] = 1.0
    path.write_text(json.dumps(data))
    res = run_cli("metrics", result.artifacts)
    assert res.returncode == 1 and "itl_ms_p50" in res.stdout and "DIFFERS" in res.stdout
    with pytest.raises(UserError, match="no such file"):
        recompute(tmp_path / "nope")
