"""Build environments: the virtualenv of a ``pip:`` build, created once per version under the cache.

``deps=full`` is a plain ``pip install sglang==X`` (the GPU stack, for GPU machines). ``deps=none`` installs
sglang with ``--no-deps`` plus the few small packages its flag parser imports (pinned as sglang's own
metadata pins them), CPU ``torch==V`` and the import-only stubs of ``harness/data/stubs``: enough to parse flags
and print ``--help`` on a machine without a GPU, never enough to serve. ``deps=cpu``, the real-SGLang CPU build
that does serve ("real SGLang, plain-torch kernels on CPU"), is made by :mod:`harness.build.sglang_cpu` with this
module's machinery. Creation is guarded by a file lock, so concurrent runs create an environment once; a marker
file says it is complete.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from harness.build.probes import PINS, PROBE_TIMEOUT_S, read_answer
from harness.build.spec import BuildSpec, bad_spec
from harness.data import data_path
from harness.util.atomic import write_atomic
from harness.util.bounded_read import read_bytes, read_json
from harness.util.errors import InfraError, UserError
from harness.util.paths import default_cache_dir
from harness.util.proc import run_bounded
from harness.util.text import last_line

__all__ = ["NODEPS_PACKAGES", "NODEPS_TORCH", "default_cache_dir", "ensure_pip_env", "interpreter", "pip_env_ready",
           "short_hash", "venv_python"]

log = logging.getLogger(__name__)

# What ``sglang.srt.server_args`` imports on its way in (0.5.14, 0.5.15), found by trying.
NODEPS_PACKAGES = (
    "numpy", "orjson", "psutil", "pybase64", "requests", "packaging", "pillow", "fastapi", "msgspec",
    "pyzmq", "tqdm", "IPython", "aiohttp", "huggingface_hub", "transformers", "openai",
    "partial_json_parser", "dill", "sentencepiece",
)  # fmt: skip
NODEPS_TORCH = "2.13.0"  # the CPU build pip finds on these machines; sglang pins 2.11.0, unused for parsing

_STUBS_DIR = data_path("stubs")
# The stubs' machinery is the CPU build's stand-ins' own (one copy, found by its top-level name): copied beside them.
_PLACEHOLDERS = Path(__file__).resolve().parent / "sglang_cpu" / "standins" / "_sglang_repro_placeholders.py"
_ENV_MARKER = "sglang-repro-env.json"
_PIP_TIMEOUT_S = {"full": 3600.0, "none": 1200.0}


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _stubs_digest() -> str:
    digest = hashlib.sha256()
    named = [(path.relative_to(_STUBS_DIR).as_posix(), path) for path in sorted(_STUBS_DIR.rglob("*.py"))]
    for name, path in [*named, (_PLACEHOLDERS.name, _PLACEHOLDERS)]:
        digest.update(name.encode())
        digest.update(read_bytes(path, "source"))
    return digest.hexdigest()[:16]


def _install_stubs(python: Path) -> None:
    site = run_bounded([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], timeout=30)
    target = Path(site.stdout.strip())
    for entry in _STUBS_DIR.iterdir():
        if entry.name.startswith((".", "__pycache__")):
            continue
        destination = target / entry.name
        if entry.is_dir():
            shutil.rmtree(destination, ignore_errors=True)
            shutil.copytree(entry, destination, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(entry, destination)
    shutil.copy2(_PLACEHOLDERS, target / _PLACEHOLDERS.name)


def _pip(python: Path, args: Sequence[str], *, timeout: float) -> None:
    done = run_bounded([str(python), "-m", "pip", "install", "--disable-pip-version-check", *args], timeout=timeout)
    if done.returncode != 0:
        raise InfraError(f"pip install {' '.join(args)} failed: {last_line(done.stderr)}")


def _said(line: str, started: float | None = None) -> None:
    """A step of a long preparation, on stderr as it starts (stdout is the command's answer): a run that builds an
    environment was silent for 155 s."""
    took = f" ({time.monotonic() - started:.0f} s so far)" if started is not None else ""
    print(f"sglang-repro: {line}{took}", file=sys.stderr, flush=True)


def ensure_pip_env(
    version: str,
    *,
    deps: str = "full",
    cache_dir: Path | None = None,
    base_python: str | None = None,
    torch: str = NODEPS_TORCH,
) -> Path:
    """Create (once) and return the virtualenv holding ``sglang==version``; safe across processes.

    ``deps=cpu`` is the real-SGLang CPU build, made by :func:`harness.build.sglang_cpu.ensure_cpu_env` (its own
    recipe: CPU torch 2.13.0 whatever ``torch`` says, the harness's interpreter whatever ``base_python`` says).
    """
    if deps == "cpu":
        from harness.build.sglang_cpu.environment import ensure_cpu_env  # it builds on this module

        return ensure_cpu_env(version, cache_dir=cache_dir)
    if deps not in _PIP_TIMEOUT_S:
        raise UserError(f"deps={deps!r}: valid values are full, none, cpu")
    base = base_python or sys.executable
    venv = _pip_env_dir(version, deps, cache_dir, base_python, torch)
    envs, name = venv.parent, venv.name
    from harness.util.output_path import make_folder

    try:
        make_folder(envs, "the environments cache")
    except OSError as exc:  # a FIFO or file in the way, a read-only disk: one line, not a traceback
        raise UserError(f"the environments cache {envs}: cannot create it ({exc.strerror or exc}); "
                        "give another --cache-dir or $SGLANG_REPRO_CACHE") from None
    marker = venv / _ENV_MARKER
    import filelock  # here, not at the top: the scenario format imports this module, and `validate` needs no lock

    with filelock.FileLock(str(envs / f"{name}.lock"), timeout=_PIP_TIMEOUT_S[deps] + 600):
        if marker.is_file():
            if deps == "none" and read_json(marker, "state").get("stubs") != _stubs_digest():
                _install_stubs(venv_python(venv))
                _write_marker(marker, version, deps)
            return venv
        shutil.rmtree(venv, ignore_errors=True)  # a half-built env from a killed run
        started = time.monotonic()
        _create(venv, version, deps, base, torch)
        _write_marker(marker, version, deps)
        log.info("created %s in %.0f s", venv, time.monotonic() - started)
        _said(f"sglang=={version} (deps={deps}) ready", started)
    return venv


def _create(venv: Path, version: str, deps: str, base: str, torch: str) -> None:
    """The environment's steps, each said on stderr as it starts (minutes the first time)."""
    started = time.monotonic()
    log.info("creating %s (sglang==%s, deps=%s)", venv, version, deps)
    steps = 2 if deps == "full" else 3
    _said(f"preparing sglang=={version} (deps={deps}) in {venv}: minutes the first time, reused after; "
          f"1/{steps} a virtual environment")
    done = run_bounded([base, "-m", "venv", str(venv)], timeout=300)
    if done.returncode != 0:
        raise InfraError(f"{base} -m venv {venv} failed: {last_line(done.stderr)}")
    python = venv_python(venv)
    timeout = _PIP_TIMEOUT_S[deps]
    if deps == "full":
        _said(f"2/{steps} pip install sglang=={version} and its GPU stack (gigabytes)", started)
        _pip(python, [f"sglang=={version}"], timeout=timeout)
        return
    _said(f"2/{steps} pip install --no-deps sglang=={version}", started)
    _pip(python, ["--no-deps", f"sglang=={version}"], timeout=timeout)
    pins = run_bounded([str(python), "-c", PINS, *NODEPS_PACKAGES], timeout=PROBE_TIMEOUT_S)
    if pins.returncode != 0:
        raise InfraError(f"reading sglang {version}'s requirements failed: {last_line(pins.stderr)}")
    _said(f"3/{steps} pip install torch=={torch} (CPU) and the packages sglang imports", started)
    _pip(python, [f"torch=={torch}", *read_answer(pins.stdout)], timeout=timeout)
    _install_stubs(python)


def _pip_env_dir(version: str, deps: str, cache_dir: Path | None, base_python: str | None, torch: str) -> Path:
    tag = f"py{sys.version_info.major}{sys.version_info.minor}" if base_python is None else short_hash(base_python)
    name = f"sglang-{version}-{'full' if deps == 'full' else f'nodeps-torch{torch}'}-{tag}"
    return (cache_dir or default_cache_dir()) / "envs" / name


def pip_env_ready(spec: BuildSpec, *, cache_dir: Path | None = None) -> bool:
    """Whether the environment of a ``pip:`` spec is already created (so resolving it installs nothing)."""
    f = spec.fields
    if f["deps"] == "cpu":
        from harness.build.sglang_cpu.environment import cpu_env_ready

        return cpu_env_ready(f["version"], cache_dir=cache_dir)
    base = interpreter(spec.spec, f["python"]) if "python" in f else None
    venv = _pip_env_dir(f["version"], f["deps"], cache_dir, base, f.get("torch", NODEPS_TORCH))
    return (venv / _ENV_MARKER).is_file()


def _write_marker(marker: Path, version: str, deps: str) -> None:
    record = {"sglang": version, "deps": deps, "stubs": _stubs_digest() if deps == "none" else None}
    write_atomic(marker, json.dumps(record) + "\n")  # the marker says the environment is whole: never half


def short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def interpreter(spec: str, path: str) -> str:
    candidate = Path(path).expanduser()
    if not candidate.is_file() or not os.access(candidate, os.X_OK):
        raise bad_spec(spec, f"{path} is not an executable interpreter")
    return str(candidate.absolute())
