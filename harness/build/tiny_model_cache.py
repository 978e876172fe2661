"""Models the harness makes itself (``tiny:NAME``), made once into the cache: never downloaded.

A scenario names one as ``server.model: tiny:gemma4`` (usually in its ``cpu:`` section); the real-SGLang CPU
build's launcher turns the name into the folder (:func:`tiny_model_path`) and pre-flight makes it when it is
not there yet (:func:`ensure_tiny_model`); ``sglang-repro prepare tiny:NAME`` makes it ahead of time. Each model
is random but deterministic (a fixed seed), and the same folder serves every build, so runs of two releases
compare the same weights.

- ``tiny:llama``: a 2-layer, hidden-64 ``LlamaForCausalLM`` with a BPE tokenizer
  (:func:`harness.build.sglang_cpu.tiny_models.make_tiny_llama`; numpy and ``tokenizers``, made in this process);
- ``tiny:gemma4`` and ``tiny:gemma4-assistant``: a 2-layer Gemma-4 text target and its
  ``Gemma4AssistantForCausalLM`` draft, made together by transformers' own classes
  (:mod:`harness.build.sglang_cpu.tiny_gemma4`) in a real-SGLang CPU environment's interpreter, which has
  torch and transformers (the harness's own has neither).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness.util.atomic import write_atomic
from harness.util.bounded_read import read_json
from harness.util.errors import InfraError, UserError
from harness.util.paths import default_cache_dir
from harness.util.proc import run_bounded
from harness.util.text import last_line

__all__ = ["TINY_MODELS", "TINY_PREFIX", "ensure_tiny_model", "is_tiny", "tiny_model_path", "tiny_name_of"]

TINY_PREFIX = "tiny:"
_MARKER = "sglang-repro-tiny-model.json"
_SEED = 0
_MAKE_TIMEOUT_S = 600.0
_LOCK_TIMEOUT_S = 2 * _MAKE_TIMEOUT_S


@dataclass(frozen=True)
class TinyModel:
    """Where one tiny model lives: ``folder`` (made as a whole, one marker) and the model's part of it."""

    folder: str
    part: str  # "" when the model is the whole folder
    maker: str  # "llama" (numpy, in this process) or "gemma4" (transformers, in a CPU build's interpreter)


TINY_MODELS = {
    "llama": TinyModel(f"tiny-llama-s{_SEED}", "", "llama"),
    "gemma4": TinyModel(f"tiny-gemma4-s{_SEED}", "target", "gemma4"),
    "gemma4-assistant": TinyModel(f"tiny-gemma4-s{_SEED}", "draft", "gemma4"),
}


def is_tiny(model: str | None) -> bool:
    return bool(model) and str(model).startswith(TINY_PREFIX)


def _entry(model: str) -> TinyModel:
    name = model[len(TINY_PREFIX):]
    if name not in TINY_MODELS:
        raise UserError(f"model {model!r}: no such tiny model (valid: {', '.join(TINY_PREFIX + n for n in TINY_MODELS)})")
    return TINY_MODELS[name]


def tiny_model_path(model: str, *, cache_dir: Path | None = None) -> Path:
    """The folder of ``tiny:NAME`` in the cache (made or not); UserError for an unknown name."""
    entry = _entry(model)
    folder = (cache_dir or default_cache_dir()) / "models" / entry.folder
    return folder / entry.part if entry.part else folder


def tiny_name_of(model: str | None, *, cache_dir: Path | None = None) -> str | None:
    """``tiny:NAME`` when ``model`` is the folder of that tiny model in the cache (how a launcher resolved it), else
    None: what a scenario written back out says instead of this machine's cache path."""
    if not model or is_tiny(model):
        return None
    for name in TINY_MODELS:
        if Path(model) == tiny_model_path(TINY_PREFIX + name, cache_dir=cache_dir):
            return TINY_PREFIX + name
    return None


def _made(folder: Path) -> bool:
    marker = folder / _MARKER
    return marker.is_file() and isinstance(read_json(marker, "state"), dict)


def ensure_tiny_model(model: str, *, python: str | None = None, cache_dir: Path | None = None) -> Path:
    """Make ``tiny:NAME`` once (file lock, marker) and return its folder.

    ``python``: an interpreter with torch and transformers (a real-SGLang CPU build's) for the Gemma-4 pair; when
    None, any CPU build environment already made in the cache is used.
    """
    entry = _entry(model)
    cache = cache_dir or default_cache_dir()
    folder = cache / "models" / entry.folder
    path = folder / entry.part if entry.part else folder
    if _made(folder):
        return path
    import filelock

    folder.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(folder.parent / f"{entry.folder}.lock"), timeout=_LOCK_TIMEOUT_S):
        if _made(folder):
            return path
        import shutil

        shutil.rmtree(folder, ignore_errors=True)  # a half-made model from a killed run
        started = time.monotonic()
        folder.mkdir(parents=True)
        maker_python = _make(entry, folder, python, cache)
        record = {"model": model, "seed": _SEED, "maker": entry.maker, "python": maker_python,
                  "seconds": round(time.monotonic() - started, 1)}
        write_atomic(folder / _MARKER, json.dumps(record, indent=1) + "\n")  # last: the model is whole
    return path


def _make(entry: TinyModel, dest: Path, python: str | None, cache: Path) -> str:
    if entry.maker == "llama":
        from harness.build.sglang_cpu.tiny_models import make_tiny_llama

        make_tiny_llama(dest, seed=_SEED)
        return sys.executable
    interpreter = python or _any_cpu_interpreter(cache)
    from harness.build.sglang_cpu import tiny_gemma4

    script = str(Path(tiny_gemma4.__file__).resolve())
    done = run_bounded([interpreter, script, str(dest), "--seed", str(_SEED)], timeout=_MAKE_TIMEOUT_S,
                       env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONSAFEPATH": "1"})
    if done.returncode != 0:
        raise InfraError(f"making the tiny Gemma-4 pair with {interpreter} failed: {last_line(done.stderr)}")
    return interpreter


def _any_cpu_interpreter(cache: Path) -> str:
    from harness.build.environments import venv_python
    from harness.build.sglang_cpu.environment import env_record

    for venv in sorted((cache / "envs").glob("sglang-*-cpu-*"), reverse=True):
        if venv.is_dir() and env_record(venv) is not None:
            return str(venv_python(venv))
    raise InfraError("the tiny Gemma-4 pair is made with transformers from a real-SGLang CPU environment, and none is "
                     "made yet: sglang-repro prepare 'pip:sglang==0.5.15,deps=cpu' tiny:gemma4")
