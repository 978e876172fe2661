"""Whether this host can run a real item: its hardware requirement against the GPUs present
(``harness.server.hardware.inventory``: NVML, or ``$SGLANG_REPRO_GPU_INVENTORY`` when set)."""

from __future__ import annotations

from collections.abc import Sequence

from harness.scenario.model import Hardware
from harness.server import hardware
from harness.server.hardware import Gpu

__all__ = ["hardware_gap", "matching", "model_hint", "override_hint"]


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


def override_hint(hw: Hardware, gpus: Sequence[Gpu]) -> str:
    """The ``--set`` that would point the item at this host's GPUs, as a skip reason's last words: a user with
    an H200 host sees the line that runs a scenario written for L40S, rather than only what is missing."""
    if not gpus:
        return "needs a GPU host; there, --set hardware.gpu_name=NAME --set hardware.gpus=N points it at its GPUs"
    name = gpus[0].name
    same = [g for g in gpus if g.name == name]
    count = min(hw.gpus, len(same)) if hw.gpus else len(same)
    short = name.removeprefix("NVIDIA ").split()[0] if name.removeprefix("NVIDIA ").split() else name
    return f"to run it on this host's GPUs: --set hardware.gpu_name={short} --set hardware.gpus={count}"


def model_hint(reason: str) -> str:
    """For a skip whose model is missing: the other way to run it than the download the reason names."""
    if "model" not in reason or "download" not in reason:
        return ""
    return "; or point the scenario at a local copy: --set server.model=PATH (--set server.draft_model=PATH)"
