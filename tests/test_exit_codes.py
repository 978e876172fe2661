"""Exit codes at the command line: bad input is 2 with one line wherever it is found, and what could not
run is reported as not run (exit 3), never as an expectation that failed."""

from __future__ import annotations

from pathlib import Path

import pytest

# A claim about the harness, not the model: its reference servers are the torch-free stand-in (tests/conftest.py).
pytestmark = pytest.mark.standin

REPO = Path(__file__).resolve().parent.parent
LONG = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"


def _one_line_error(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def test_malformed_gpu_inventory_is_bad_input_before_anything_starts(run_cli, tmp_path: Path) -> None:
    res = run_cli("run", LONG, "--case", "tokens=276,path=graph", "--build", "sim:post-fix", "--out", tmp_path,
                  env={"SGLANG_REPRO_GPU_INVENTORY": "0,zero"})
    assert res.returncode == 2
    assert "SGLANG_REPRO_GPU_INVENTORY: entry 'zero'" in _one_line_error(res.stderr)
    assert not (tmp_path / "runs").exists()


def test_bad_build_spec_is_bad_input_not_infra(run_cli, tmp_path: Path) -> None:
    res = run_cli("run", LONG, "--case", "tokens=276,path=graph", "--build", "sim:half-fixed", "--out", tmp_path)
    assert res.returncode == 2
    assert "unknown revision 'half-fixed'" in _one_line_error(res.stderr)
    assert not (tmp_path / "runs").exists()


def test_compare_on_a_host_without_the_hardware_says_not_run(run_cli, tmp_path: Path) -> None:
    res = run_cli("compare", LONG, "--case", "tokens=276,path=eager", "--before", "pip:sglang==0.5.14",
                  "--after", "pip:sglang==0.5.15", "--out", tmp_path,
                  env={"SGLANG_REPRO_GPU_INVENTORY": "", "SGLANG_REPRO_CACHE": str(tmp_path / "cache")})
    assert res.returncode == 3, res.stdout + res.stderr
    assert "EXPECTATION NOT HELD" not in res.stdout and "did NOT hold" not in res.stdout
    [verdict] = [ln for ln in res.stdout.splitlines() if ln.startswith("verdict:")]
    assert "could not run every case" in verdict and "needs 4 GPUs" in verdict
    assert not (tmp_path / "cache").exists()
