"""The virtualenv of the real-SGLang CPU build, and the environment its server launches with.

One virtualenv per release under ``<cache>/envs/``, made once behind a file lock with a marker that says it is
whole (the machinery of :mod:`harness.build.environments`): CPU ``torch==2.13.0``, the real wheel ``--no-deps``,
then its pure-Python dependencies at the wheel's own pins (:mod:`harness.build.sglang_cpu.requirements`), all
under a constraints file that pins torch and pins every GPU package to a version that does not exist. The
installer is uv when the harness has it, else pip (:mod:`harness.build.sglang_cpu.installer`). The
stand-ins are not copied into it: they are this package's data, put first on the server's ``PYTHONPATH`` by
:func:`server_environment`, so editing a port needs no rebuild.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from harness.build.environments import venv_python
from harness.build.sglang_cpu.installer import Installer, choose_installer
from harness.build.sglang_cpu.requirements import CPU_TORCH, constraints_text, cpu_requirements
from harness.util.atomic import write_atomic
from harness.util.bounded_read import read_json
from harness.util.errors import InfraError, UserError
from harness.util.paths import default_cache_dir
from harness.util.proc import run_bounded
from harness.util.text import last_line

__all__ = ["AMX_ENV", "LABEL", "RECIPE", "STANDINS_DIR", "cpu_env_dir", "cpu_env_ready", "ensure_cpu_env", "env_record",
           "server_environment"]

log = logging.getLogger(__name__)

LABEL = "real SGLang, plain-torch kernels on CPU"
STANDINS_DIR = Path(__file__).resolve().parent / "standins"
# Read by standins/sitecustomize.py in every interpreter of the server.
AMX_ENV = "SGLANG_REPRO_CPU_HAS_AMX"
# Bumped when what an environment holds changes (a package added, a pin rule changed): older ones are remade.
RECIPE = 1
_MARKER = "sglang-repro-cpu-env.json"
_PIP_TIMEOUT_S = 1800.0
_IMPORT_TIMEOUT_S = 600.0
_LOCK_TIMEOUT_S = _PIP_TIMEOUT_S * 3


def cpu_env_dir(version: str, cache_dir: Path | None = None) -> Path:
    tag = f"py{sys.version_info.major}{sys.version_info.minor}"
    return (cache_dir or default_cache_dir()) / "envs" / f"sglang-{version}-cpu-torch{CPU_TORCH}-{tag}"


def env_record(venv: Path) -> dict[str, object] | None:
    """The marker of a whole environment (what was installed, how long it took), or None."""
    marker = venv / _MARKER
    if not marker.is_file():
        return None
    record = read_json(marker, "state")
    return record if isinstance(record, dict) and record.get("recipe") == RECIPE else None


def cpu_env_ready(version: str, *, cache_dir: Path | None = None) -> bool:
    """Whether the environment of ``version`` is already made (so preparing it installs nothing)."""
    return env_record(cpu_env_dir(version, cache_dir)) is not None


def _install(installer: Installer, python: Path, args: Sequence[str], constraints: Path) -> Installer:
    """Install ``args``; when uv fails, say why and install with pip from then on (the installer used is returned)."""
    done = run_bounded(installer.argv(python, constraints, args), timeout=_PIP_TIMEOUT_S, env=installer.env or None)
    if done.returncode == 0:
        return installer
    errors = [line for line in done.stderr.splitlines() if line.lstrip().startswith(("ERROR", "error"))]
    reason = errors[0].strip() if errors else last_line(done.stderr)
    if installer.uv is None:
        raise InfraError(f"pip install {' '.join(args)} failed: {reason}")
    log.warning("uv pip install %s failed (%s); installing with pip", " ".join(args), reason)
    ensured = run_bounded([str(python), "-m", "ensurepip", "--default-pip"], timeout=300)
    if ensured.returncode != 0:
        raise InfraError(f"{python} -m ensurepip failed: {last_line(ensured.stderr)}")
    return _install(Installer(), python, args, constraints)


# What a server of this build imports in its processes (HTTP server, scheduler, detokenizer, the model registry, which
# imports every model module) and pre-flight's flag parser.
_SERVING_IMPORTS = ("sglang.srt.server_args", "sglang.launch_server", "sglang.srt.managers.scheduler",
                    "sglang.srt.managers.detokenizer_manager", "sglang.srt.models.registry")


def _warm_imports(python: Path, venv: Path) -> None:
    """Import what the server imports, once, writing the bytecode; fail here, naming the module, when it cannot.

    Neither installer byte-compiles (pip --no-compile; uv by default), and where ``$PYTHONDONTWRITEBYTECODE`` is set
    (these machines) no server would ever write it: each of its processes compiled sglang and torch again, 39 s
    against 18 s for pre-flight's parser alone here. Compiling only what is imported costs a fraction of compiling
    every installed file. A dependency the serving path needs and the environment lacks fails the build, not a run.
    """
    script = "import importlib, sys\nsys.dont_write_bytecode = False\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
    env = {**server_environment(venv), "PYTHONDONTWRITEBYTECODE": ""}
    done = run_bounded([str(python), "-c", script, *_SERVING_IMPORTS], timeout=_IMPORT_TIMEOUT_S, env=env)
    if done.returncode != 0:
        raise InfraError(f"{venv}: cannot import sglang's server ({last_line(done.stderr)})")


def _warm_older(venv: Path, record: dict[str, object]) -> None:
    """An environment made before the warm-up (no bytecode: each server start compiled sglang and torch) is warmed
    once; it served before, so a failing import is only logged and the environment stays as it was."""
    warmed: bool | str = True
    try:
        _warm_imports(venv_python(venv), venv)
    except InfraError as exc:
        log.warning("%s (served before; left as it was)", exc)
        warmed = str(exc)  # not tried again
    write_atomic(venv / _MARKER, json.dumps({**record, "bytecode": warmed}, indent=1) + "\n")


def ensure_cpu_env(version: str, *, cache_dir: Path | None = None) -> Path:
    """Make (once) and return the virtualenv of real ``sglang==version`` for the CPU; safe across processes."""
    from harness.contract.wheels import fetch_wheel
    from harness.util.output_path import make_folder

    venv = cpu_env_dir(version, cache_dir)
    try:
        make_folder(venv.parent, "the environments cache")
    except OSError as exc:
        raise UserError(f"the environments cache {venv.parent}: cannot create it ({exc.strerror or exc}); "
                        "give another --cache-dir or $SGLANG_REPRO_CACHE") from None
    import filelock

    with filelock.FileLock(str(venv.parent / f"{venv.name}.lock"), timeout=_LOCK_TIMEOUT_S):
        made = env_record(venv)
        if made is not None:
            if "bytecode" not in made:
                _warm_older(venv, made)
            return venv
        shutil.rmtree(venv, ignore_errors=True)  # a half-made env from a killed run, or an older recipe
        started = time.monotonic()
        wheel = fetch_wheel(version, cache_dir)
        reqs = cpu_requirements(wheel)
        log.info("making %s (real sglang==%s for the CPU)", venv, version)
        installer = choose_installer()
        # uv installs from outside the environment: no pip in it (a fallback to pip puts one there first).
        done = run_bounded([sys.executable, "-m", "venv", *(["--without-pip"] if installer.uv else []), str(venv)],
                           timeout=300)
        if done.returncode != 0:
            raise InfraError(f"{sys.executable} -m venv {venv} failed: {last_line(done.stderr)}")
        python = venv_python(venv)
        constraints = venv / "sglang-repro-constraints.txt"
        write_atomic(constraints, constraints_text())
        installer = _install(installer, python, [f"torch=={CPU_TORCH}"], constraints)
        installer = _install(installer, python, ["--no-deps", str(wheel)], constraints)
        installer = _install(installer, python, list(reqs.install), constraints)
        if reqs.no_deps:
            installer = _install(installer, python, ["--no-deps", *reqs.no_deps], constraints)
        _warm_imports(python, venv)
        seconds = round(time.monotonic() - started, 1)
        record = {"recipe": RECIPE, "sglang": version, "torch": CPU_TORCH, "wheel_torch_pin": reqs.torch_pin,
                  "label": LABEL, "seconds": seconds, "installer": installer.name, "bytecode": True,
                  "installed": list(reqs.install), "no_deps": list(reqs.no_deps), "skipped": list(reqs.skipped)}
        write_atomic(venv / _MARKER, json.dumps(record, indent=1) + "\n")
        log.info("made %s in %.0f s", venv, seconds)
    return venv


def server_environment(venv: Path, *, keep_intel_amx: bool = False) -> dict[str, str]:
    """The variables a server of this build launches with (on top of the caller's environment).

    ``keep_intel_amx``: SGLang is told the CPU has AMX (``standins/sitecustomize.py``), so
    ``--attention-backend intel_amx`` is kept rather than swapped for torch_native; speculative decoding needs
    it (its verify step), and its kernels are the plain-torch ports.

    - ``PYTHONPATH``: the stand-ins (``triton``, ``torchvision``, ``sgl_kernel``, ``sglang_cpu_ports``);
    - ``SGLANG_USE_CPU_ENGINE=1``: without it ``is_cpu()`` is false (0.5.21 ``srt/utils/common.py:218-220``)
      and the CUDA paths are taken (rotary embedding imports vllm, ``srt/layers/rotary_embedding/base.py:133``);
    - ``HF_HUB_OFFLINE=1``: the model is a local folder; nothing is ever downloaded;
    - ``TORCHDYNAMO_DISABLE=1``: SGLang's ``@torch.compile`` helpers (the draft's top-k selection, 0.5.21
      ``srt/speculative/spec_utils.py:334,368``) run eagerly; Inductor would need a C++ toolchain on every
      machine and minutes of compiling on two cores, for the same arithmetic;
    - ``SGLANG_REPRO_BUILD_LABEL``: what this build is, for logs and reports.
    """
    del venv  # the interpreter is chosen by the caller; nothing here depends on the release
    env = {
        "PYTHONPATH": str(STANDINS_DIR),
        "SGLANG_USE_CPU_ENGINE": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TORCHDYNAMO_DISABLE": "1",
        "SGLANG_REPRO_BUILD_LABEL": LABEL,
    }
    if keep_intel_amx:
        env[AMX_ENV] = "1"
    return env
