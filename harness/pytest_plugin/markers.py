"""Markers of scenario items, registered as they appear so that ``--strict-markers`` passes.

- ``gpu``: runs a real SGLang build; ``sim``: runs the CPU reference server (a model of SGLang).
- Hardware, on gpu items only: ``gpus<N>`` (``hardware.gpus``), one slug per alternative of
  ``hardware.gpu_name`` (``"B200|B300"`` -> ``b200``, ``b300``), ``sm<major><minor>`` from
  ``hardware.min_compute_capability`` (``"8.9"`` -> ``sm89``).
- The scenario's own ``markers``, on both kinds.
- ``slow`` on both: every item starts a server.
"""

from __future__ import annotations

import re

import pytest

from harness.scenario.model import Hardware

__all__ = ["GPU", "SIM", "SLOW", "gpu_name_slugs", "hardware_markers", "register"]

GPU = "gpu"
SIM = "sim"
SLOW = "slow"
_STATIC = {
    GPU: "runs a real SGLang build (needs the scenario's GPUs; skipped with a reason otherwise)",
    SIM: "runs the CPU reference server, a model of SGLang's mechanism (no GPU)",
    SLOW: "starts servers or subprocesses; slower than a unit test",
}
_REGISTERED = pytest.StashKey[set[str]]()


def gpu_name_slugs(pattern: str) -> list[str]:
    """One marker per alternative of a GPU-name regex: ``"(L40S|L40)"`` -> ``l40s``, ``l40``."""
    slugs = []
    for alternative in pattern.split("|"):
        slug = re.sub(r"[^a-z0-9]+", "_", alternative.lower()).strip("_")
        if slug and slug not in slugs:
            slugs.append(slug)
    return slugs


def hardware_markers(hw: Hardware) -> dict[str, str]:
    """Marker name -> description for a hardware requirement."""
    found = {f"gpus{hw.gpus}": f"needs {hw.gpus} GPU{'s' if hw.gpus != 1 else ''}"}
    for slug in gpu_name_slugs(hw.gpu_name or ""):
        found[slug] = f"needs GPUs whose name matches {hw.gpu_name}"
    if hw.min_compute_capability:
        major, minor = hw.min_compute_capability.split(".")
        found[f"sm{major}{minor}"] = f"needs compute capability >= {hw.min_compute_capability}"
    return found


def register(config: pytest.Config, name: str, description: str) -> None:
    """Register ``name`` once per session (``pytest --markers`` lists it)."""
    seen = config.stash.get(_REGISTERED, None)
    if seen is None:
        # Markers the project registered itself (e.g. ``slow`` in pyproject.toml) keep their text.
        seen = config.stash[_REGISTERED] = {line.split(":")[0].split("(")[0].strip()
                                            for line in config.getini("markers")}
    if name not in seen:
        seen.add(name)
        config.addinivalue_line("markers", f"{name}: {description}")


def pytest_configure(config: pytest.Config) -> None:
    for name, description in _STATIC.items():
        register(config, name, description)
