"""The scenario's ``hardware.cpus`` and ``hardware.host_memory_gib`` in the SLURM submission, seen by the real
cluster (``scontrol show job``), and their validation as one-line errors."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from harness.executor.slurm import SlurmOptions, _parameters
from harness.scenario.model import Hardware
from tests.slurm.test_executor import _cli, _job_ids, _scenario


def test_cpus_and_memory_become_sbatch_parameters(tmp_path: Path) -> None:
    params = _parameters(Hardware(gpus=1, cpus=6, host_memory_gib=24), 600, SlurmOptions(folder=tmp_path))
    assert params["cpus_per_task"] == 6 and params["additional_parameters"]["mem"] == "24576M"
    bare = _parameters(Hardware(gpus=1), 600, SlurmOptions(folder=tmp_path))
    assert "cpus_per_task" not in bare and "mem" not in bare["additional_parameters"]  # the cluster's defaults


@pytest.mark.parametrize(("field", "value", "words"), [
    ("cpus", 0, "greater than or equal to 1"),
    ("cpus", "many", "integer"),
    ("host_memory_gib", -2, "greater than 0"),
])
def test_bad_cpus_or_memory_is_a_one_line_error(field: str, value: object, words: str, tmp_path: Path) -> None:
    path = _scenario(tmp_path, "bad")
    data = yaml.safe_load(path.read_text())
    data["hardware"][field] = value
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    line_no = next(i for i, line in enumerate(path.read_text().splitlines(), 1) if line.strip().startswith(field))
    res = _cli("validate", path, timeout=60)
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert f"{path}:{line_no}" in lines[0] and f"hardware.{field}" in lines[0] and words in lines[0]


# A claim about the harness, not the model: its reference servers are the torch-free stand-in (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.standin]


def test_the_job_asks_slurm_for_the_scenarios_cpus_and_memory(slurm_conf: str, pg_url: str, tmp_path: Path) -> None:
    path = _scenario(tmp_path, "sized", gpus=1)
    data = yaml.safe_load(path.read_text())
    data["hardware"].update(cpus=3, host_memory_gib=1.5)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    res = _cli("run", path, "--build", "sim:post-fix", "--out", tmp_path, "--store", pg_url, "--executor", "slurm",
               "--slurm-poll", "1", "--slurm-gpu-type", "H200=h200")
    assert res.returncode == 0, res.stdout + res.stderr
    (job_id,) = _job_ids(res.stderr)
    shown = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True, timeout=30,
                           check=True).stdout  # MinJobAge keeps a finished job in slurmctld for 10 minutes
    assert re.search(r"\bCPUs/Task=3\b", shown), shown
    assert re.search(r"\bNumCPUs=3\b", shown), shown
    assert re.search(r"\bMinMemoryNode=1\.50G\b", shown), shown  # 1.5 GiB, as 1536M asked
    assert re.search(r"\bTRES=cpu=3,mem=1\.50G\b", shown), shown
    assert re.search(r"\bTresPerNode=gres:gpu:h200:1\b", shown), shown
