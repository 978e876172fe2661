"""Whether this host can run a real item: its hardware requirement against the GPUs present.

The GPUs come from NVML (honouring ``CUDA_VISIBLE_DEVICES``), or from ``$SGLANG_REPRO_GPU_INVENTORY``
when set: a comma-separated list of NVML indices, each optionally ``INDEX:NAME:MEMORY_GIB:CC``
(e.g. ``0:NVIDIA L40S:44.5:8.9``). An empty value means no GPUs. The override exists so that gating
and leasing can be exercised on hosts without GPUs; it does not give a server any GPU.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from harness import hardware
from harness.hardware import Gpu
from harness.scenario.model import Hardware

__all__ = ["INVENTORY_ENV", "gpu_inventory", "hardware_gap", "injected_inventory", "matching"]

INVENTORY_ENV = "SGLANG_REPRO_GPU_INVENTORY"
# An index-only entry has no name or size: it meets any requirement but a name or memory bound.
_UNKNOWN_NAME = "injected"


def _entry(raw: str) -> Gpu:
    parts = raw.strip().split(":")
    if not parts[0].isdigit():
        raise ValueError(f"entry {raw!r}: expected INDEX or INDEX:NAME:MEMORY_GIB:CC")
    index = int(parts[0])
    if len(parts) == 1:
        return Gpu(index=index, uuid=f"GPU-injected-{index}", name=_UNKNOWN_NAME, memory_gib=0.0,
                   compute_capability="0.0")
    if len(parts) != 4:
        raise ValueError(f"entry {raw!r}: expected INDEX or INDEX:NAME:MEMORY_GIB:CC")
    _, name, memory, cc = parts
    try:
        memory_gib = float(memory)
        major, minor = (int(x) for x in cc.split("."))
    except ValueError:
        raise ValueError(f"entry {raw!r}: MEMORY_GIB must be a number and CC like 8.9") from None
    return Gpu(index=index, uuid=f"GPU-injected-{index}", name=name, memory_gib=memory_gib,
               compute_capability=f"{major}.{minor}")


def injected_inventory() -> list[Gpu] | None:
    """The inventory ``$SGLANG_REPRO_GPU_INVENTORY`` describes, or None when it is unset."""
    text = os.environ.get(INVENTORY_ENV)
    if text is None:
        return None
    gpus = [_entry(raw) for raw in text.split(",") if raw.strip()]
    indices = [g.index for g in gpus]
    if len(set(indices)) != len(indices):
        raise ValueError(f"duplicate GPU index in {text!r}")
    return gpus


def gpu_inventory() -> list[Gpu]:
    injected = injected_inventory()
    return injected if injected is not None else hardware.inventory()


def _requirement(hw: Hardware) -> dict[str, object]:
    return {"name_pattern": hw.gpu_name, "min_memory_gib": hw.min_memory_gib,
            "min_compute_capability": hw.min_compute_capability}


def hardware_gap(hw: Hardware, gpus: Sequence[Gpu]) -> str | None:
    """What is missing for ``hw`` on ``gpus`` (one line), or None."""
    if hw.gpus == 0:
        return None
    return hardware.requirement_gap(gpus, count=hw.gpus, **_requirement(hw))  # type: ignore[arg-type]


def matching(hw: Hardware, gpus: Sequence[Gpu]) -> list[int]:
    """Indices of the GPUs that meet ``hw`` one by one: the pool an item may lease from."""
    return [g.index for g in gpus
            if hardware.requirement_gap([g], count=1, **_requirement(hw)) is None]  # type: ignore[arg-type]
