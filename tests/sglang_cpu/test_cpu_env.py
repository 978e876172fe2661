"""The real-SGLang CPU build's environment: what it installs, that a GPU package cannot get in, that it is made once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.build.environments import ensure_pip_env, pip_env_ready, venv_python
from harness.build.sglang_cpu import LABEL, STANDINS_DIR, ensure_cpu_env, server_environment
from harness.build.sglang_cpu.environment import AMX_ENV, cpu_env_dir, env_record
from harness.build.sglang_cpu.requirements import CPU_TORCH, constraints_text, cpu_requirements
from harness.build.spec import parse_build_spec
from harness.contract.wheels import fetch_wheel
from harness.util.errors import UserError

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("sglang_cpu")]

_RELEASE = "0.5.21"


def test_requirements_are_the_wheels_own_pins_less_the_gpu_stack() -> None:
    reqs = cpu_requirements(fetch_wheel(_RELEASE))
    assert reqs.version == _RELEASE and reqs.torch_pin == "torch==2.13.0"
    assert "transformers==5.12.1" in reqs.install and "openai-harmony==0.0.4" in reqs.install
    assert reqs.no_deps == ("xgrammar==0.2.7",), "xgrammar lists triton as a dependency on Linux"
    skipped = " ".join(reqs.skipped)
    for gpu in ("flashinfer-python", "sglang-kernel", "torchvision", "nvidia-cutlass-dsl", "cuda-python"):
        assert gpu in skipped
    assert not any(r.split("=")[0].split("<")[0].split(">")[0] in ("torch", "triton") for r in reqs.install)


def test_constraints_refuse_a_gpu_package_at_once(tmp_path: Path) -> None:
    constraints = tmp_path / "constraints.txt"
    constraints.write_text(constraints_text())
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "-c", str(constraints),
                           "triton"], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode != 0, done.stdout[-500:]
    assert "Cannot install triton" in done.stderr or "0.0.0.dev0" in done.stderr, done.stderr[-500:]
    assert time.monotonic() - started < 120
    assert f"torch=={CPU_TORCH}" in constraints_text()


def test_the_spec_names_this_build_and_keeps_the_others() -> None:
    assert parse_build_spec(f"pip:sglang=={_RELEASE},deps=cpu").fields["deps"] == "cpu"
    assert parse_build_spec(f"pip:sglang=={_RELEASE},deps=none").fields["deps"] == "none"
    assert parse_build_spec(f"pip:sglang=={_RELEASE}").fields["deps"] == "full"
    with pytest.raises(UserError, match="torch= applies only with deps=none"):
        parse_build_spec(f"pip:sglang=={_RELEASE},deps=cpu,torch=2.14.1")


def test_the_environment_is_made_once_and_then_reused() -> None:
    venv = ensure_cpu_env(_RELEASE)  # made here on a fresh machine (minutes), reused after
    started = time.monotonic()
    assert ensure_cpu_env(_RELEASE) == venv == cpu_env_dir(_RELEASE)
    assert ensure_pip_env(_RELEASE, deps="cpu") == venv
    assert time.monotonic() - started < 10, "a made environment is reused, not remade"
    assert pip_env_ready(parse_build_spec(f"pip:sglang=={_RELEASE},deps=cpu"))
    record = env_record(venv)
    assert record is not None and record["label"] == LABEL and record["torch"] == CPU_TORCH
    probe = ("import importlib.metadata as m, json; "
             "print(json.dumps({d: m.version(d) for d in ('sglang', 'torch', 'transformers')}))")
    done = subprocess.run([str(venv_python(venv)), "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    versions = json.loads(done.stdout)
    assert versions["sglang"] == _RELEASE and versions["torch"].startswith(CPU_TORCH) and "+cpu" in versions["torch"]


def test_server_environment_puts_the_standins_first() -> None:
    env = server_environment(cpu_env_dir(_RELEASE))
    assert env["PYTHONPATH"] == str(STANDINS_DIR)
    assert env["SGLANG_USE_CPU_ENGINE"] == "1" and env["HF_HUB_OFFLINE"] == "1"
    assert AMX_ENV not in env
    assert server_environment(cpu_env_dir(_RELEASE), keep_intel_amx=True)[AMX_ENV] == "1"
