"""Whether this host can run a real item: its hardware requirement against the GPUs present
(``harness.server.hardware.inventory``: NVML, or ``$SGLANG_REPRO_GPU_INVENTORY`` when set)."""

from __future__ import annotations

from collections.abc import Sequence

from harness.scenario.model import Hardware
from harness.server import hardware
from harness.server.hardware import Gpu

__all__ = ["hardware_gap", "matching"]


def _gap(hw: Hardware, gpus: Sequence[Gpu], count: int) -> str | None:
    return hardware.requirement_gap(gpus, count=count, name_pattern=hw.gpu_name, min_memory_gib=hw.min_memory_gib,
                                    min_compute_capability=hw.min_compute_capability)


def hardware_gap(hw: Hardware, gpus: Sequence[Gpu]) -> str | None:
    """What is missing for ``hw`` on ``gpus`` (one line), or None."""
    if hw.gpus == 0:
        return None
    return _gap(hw, gpus, hw.gpus)


def matching(hw: Hardware, gpus: Sequence[Gpu]) -> list[int]:
    """Indices of the GPUs that meet ``hw`` one by one: the pool an item may lease from."""
    return [g.index for g in gpus
            if _gap(hw, [g], 1) is None]
