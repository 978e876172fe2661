"""The virtualenv of the real-SGLang CPU build, and the environment its server launches with (in progress)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["LABEL", "STANDINS_DIR", "ensure_cpu_env", "server_environment"]

LABEL = "real SGLang, plain-torch kernels on CPU"
STANDINS_DIR = Path(__file__).resolve().parent / "standins"


def ensure_cpu_env(version: str, *, cache_dir: Path | None = None) -> Path:
    raise NotImplementedError("in progress (helper H1)")


def server_environment(venv: Path) -> dict[str, str]:
    return {"PYTHONPATH": str(STANDINS_DIR), "SGLANG_USE_CPU_ENGINE": "1", "HF_HUB_OFFLINE": "1"}
