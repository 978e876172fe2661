"""What GPUs this host has, whether they meet a scenario's needs, and when a server has let go of them.

Everything goes through NVML (``pynvml`` from the nvidia-ml-py package). A host without the driver is a
normal case, not an error: the inventory is empty and the per-GPU queries answer with empty results.

GPU indices are NVML indices (PCI bus order). ``CUDA_VISIBLE_DEVICES`` is read in that order too, which matches
CUDA only with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``; the harness sets that on every server it gives GPUs to.
"""

from __future__ import annotations

import logging
import os
import platform
import re
import socket
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.records.run_record import GpuInfo, HostInfo
from harness.util.bounded_read import ReadRefused, read_head
from harness.util.errors import UserError

__all__ = [
    "INVENTORY_ENV",
    "injected_inventory",
    "Gpu",
    "inventory",
    "requirement_gap",
    "select_visible",
    "host_info",
    "cpu_model",
    "cuda_driver_version",
    "gpu_processes",
    "gpu_memory_used_mib",
    "wait_gpu_released",
]

log = logging.getLogger(__name__)

_GIB = float(1 << 30)
_MIB = float(1 << 20)


@dataclass(frozen=True)
class Gpu:
    """One GPU as NVML reports it."""

    index: int
    uuid: str
    name: str
    memory_gib: float
    compute_capability: str  # "8.9"


@contextmanager
def _nvml() -> Iterator[Any | None]:
    """Yield the initialised pynvml module, or None when there is no usable driver."""
    try:
        import pynvml
    except ImportError:
        yield None
        return
    try:
        pynvml.nvmlInit()
    except (pynvml.NVMLError, OSError) as exc:
        log.debug("NVML unavailable: %s", exc)
        yield None
        return
    try:
        yield pynvml
    finally:
        with suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def _text(value: str | bytes) -> str:
    # Older pynvml releases return bytes.
    return value.decode() if isinstance(value, bytes) else value


def _all_gpus(nvml: Any) -> list[Gpu]:
    gpus = []
    for index in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
        gpus.append(
            Gpu(
                index=index,
                uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                name=_text(nvml.nvmlDeviceGetName(handle)),
                memory_gib=round(nvml.nvmlDeviceGetMemoryInfo(handle).total / _GIB, 2),
                compute_capability=f"{major}.{minor}",
            )
        )
    return gpus


def select_visible(gpus: Sequence[Gpu], cuda_visible_devices: str | None) -> list[Gpu]:
    """The GPUs ``CUDA_VISIBLE_DEVICES`` leaves visible, in its order.

    Entries are indices or (possibly shortened) UUIDs. Like CUDA, parsing stops at the first entry that names
    no device, and an empty value hides every GPU.
    """
    if cuda_visible_devices is None:
        return list(gpus)
    chosen: list[Gpu] = []
    for raw in cuda_visible_devices.split(","):
        entry = raw.strip()
        if entry.isdigit():
            match = [g for g in gpus if g.index == int(entry)]
        elif entry:
            match = [g for g in gpus if g.uuid.startswith(entry) or g.uuid.startswith("GPU-" + entry)]
        else:
            match = []
        if len(match) != 1:
            break
        if match[0] not in chosen:
            chosen.append(match[0])
    return chosen


INVENTORY_ENV = "SGLANG_REPRO_GPU_INVENTORY"
# An index-only entry has no name or size: it meets any requirement but a name or memory bound.
_UNKNOWN_NAME = "injected"


class InventoryError(UserError, ValueError):
    """``$SGLANG_REPRO_GPU_INVENTORY`` is malformed: bad input (exit 2), also a ValueError for old callers."""


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
    """The inventory ``$SGLANG_REPRO_GPU_INVENTORY`` describes, or None when it is unset.

    A comma-separated list of NVML indices, each optionally ``INDEX:NAME:MEMORY_GIB:CC`` (e.g.
    ``0:NVIDIA L40S:44.5:8.9``); an empty value means no GPUs. It exists so that gating, leasing and
    pre-flight can be exercised on hosts without GPUs; it gives no server a GPU.
    """
    text = os.environ.get(INVENTORY_ENV)
    if text is None:
        return None
    try:
        gpus = [_entry(raw) for raw in text.split(",") if raw.strip()]
        indices = [g.index for g in gpus]
        if len(set(indices)) != len(indices):
            raise ValueError(f"duplicate GPU index in {text!r}")
    except ValueError as exc:
        raise InventoryError(f"${INVENTORY_ENV}: {exc}; valid: a comma-separated list of "
                             "INDEX or INDEX:NAME:MEMORY_GIB:CC, or empty for no GPUs") from None
    return gpus


def inventory() -> list[Gpu]:
    """The GPUs this process may use (honouring ``CUDA_VISIBLE_DEVICES``); [] without a driver.

    ``$SGLANG_REPRO_GPU_INVENTORY``, when set, replaces NVML's answer (see :func:`injected_inventory`).
    """
    injected = injected_inventory()
    if injected is not None:
        return injected
    with _nvml() as nvml:
        if nvml is None:
            return []
        try:
            gpus = _all_gpus(nvml)
        except nvml.NVMLError as exc:
            log.warning("NVML failed while listing GPUs: %s", exc)
            return []
    return select_visible(gpus, os.environ.get("CUDA_VISIBLE_DEVICES"))


def _cc_tuple(value: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in value.split("."))
    except ValueError:
        raise UserError(f"compute capability {value!r} is not of the form MAJOR.MINOR (e.g. 8.9)") from None


def requirement_gap(
    gpus: Sequence[Gpu],
    *,
    count: int,
    name_pattern: str | None = None,
    min_memory_gib: float | None = None,
    min_compute_capability: str | None = None,
) -> str | None:
    """None when ``gpus`` hold ``count`` GPUs meeting every bound, else one line saying what is missing.

    ``name_pattern`` is a case-insensitive regular expression searched in the GPU name.
    """
    try:
        name_re = re.compile(name_pattern, re.IGNORECASE) if name_pattern else None
    except re.error as exc:
        raise UserError(f"GPU name pattern {name_pattern!r} is not a valid regular expression: {exc}") from None
    min_cc = _cc_tuple(min_compute_capability) if min_compute_capability else None

    def fits(gpu: Gpu) -> bool:
        if name_re is not None and not name_re.search(gpu.name):
            return False
        if min_memory_gib is not None and gpu.memory_gib < min_memory_gib:
            return False
        return min_cc is None or _cc_tuple(gpu.compute_capability) >= min_cc

    found = sum(1 for gpu in gpus if fits(gpu))
    if found >= count:
        return None
    wanted = f"needs {count} GPU{'s' if count != 1 else ''}"
    if name_pattern:
        wanted += f" matching {name_pattern}"
    bounds = []
    if min_memory_gib is not None:
        bounds.append(f">= {min_memory_gib:g} GiB")
    if min_compute_capability:
        bounds.append(f"compute capability >= {min_compute_capability}")
    if bounds:
        wanted += " with " + " and ".join(bounds)
    present = ", ".join(f"{g.name} {g.memory_gib:.0f} GiB cc {g.compute_capability}" for g in gpus) or "no GPUs"
    return f"{wanted}, found {found} (host has: {present})"


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The CPU's model name, as /proc/cpuinfo names it, or None where it does not say.

    x86 writes ``model name``; many arm64 kernels write no model name but ``Hardware`` or ``Model``
    (a board name), or nothing at all. The model keys a CPU host's series: a kernel update leaves it.
    """
    try:
        text = read_head(Path(cpuinfo), "kernel", 1 << 20).decode("utf-8", errors="replace")
    except (OSError, ReadRefused):
        return None
    for field in ("model name", "Hardware", "Model", "cpu model"):
        match = re.search(rf"^{field}\s*:\s*(.+?)\s*$", text, re.MULTILINE)
        if match and match.group(1):
            return " ".join(match.group(1).split())
    return None


def cuda_driver_version(encoded: int) -> str:
    """NVML's CUDA driver version (``1000 * major + 10 * minor``, e.g. 12040) as nvidia-smi prints it: ``12.4``."""
    return f"{encoded // 1000}.{(encoded % 1000) // 10}"


def host_info() -> HostInfo:
    """Facts about this host worth recording next to every result.

    ``cuda_version`` is the CUDA version the driver supports (NVML's ``nvmlSystemGetCudaDriverVersion``,
    the "CUDA Version" of nvidia-smi's header), a fact of the host; the CUDA a build was compiled for is
    the build's (SGLang's ``check_env`` reports the driver via ``nvidia-smi --query-gpu=driver_version`` and
    the toolkit via ``nvcc -V``: sglang 0.5.15 ``check_env.py:156-202``, ``srt/utils/common.py:1058-1073``).
    ``cpu`` is the CPU model (``cpu_model``).
    """
    driver = cuda = None
    with _nvml() as nvml:
        if nvml is not None:
            with suppress(nvml.NVMLError):
                driver = _text(nvml.nvmlSystemGetDriverVersion())
            with suppress(nvml.NVMLError):
                cuda = cuda_driver_version(int(nvml.nvmlSystemGetCudaDriverVersion()))
    return HostInfo(
        hostname=socket.gethostname(),
        gpus=tuple(GpuInfo(index=g.index, name=g.name, uuid=g.uuid, memory_gib=g.memory_gib,
                           compute_capability=g.compute_capability) for g in inventory()),
        driver_version=driver,
        cuda_version=cuda,
        cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        platform=platform.platform(),
        python=platform.python_version(),
        cpu_count=os.cpu_count(),
        cpu=cpu_model(),
        python_executable=sys.executable,
    )


def gpu_processes(indices: Sequence[int]) -> dict[int, list[int]]:
    """PIDs NVML lists on each GPU (compute and graphics); empty lists without a driver.

    Inside a container NVML may report host PIDs, which do not match the PIDs this process sees.
    """
    result: dict[int, list[int]] = {i: [] for i in indices}
    with _nvml() as nvml:
        if nvml is None:
            return result
        for index in indices:
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                procs = list(nvml.nvmlDeviceGetComputeRunningProcesses(handle))
                procs += list(nvml.nvmlDeviceGetGraphicsRunningProcesses(handle))
            except nvml.NVMLError as exc:
                log.warning("NVML could not list processes on GPU %d: %s", index, exc)
                continue
            result[index] = sorted({p.pid for p in procs})
    return result


def gpu_memory_used_mib(indices: Sequence[int]) -> dict[int, float]:
    """Used memory per GPU in MiB; empty without a driver."""
    result: dict[int, float] = {}
    with _nvml() as nvml:
        if nvml is None:
            return result
        for index in indices:
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                result[index] = nvml.nvmlDeviceGetMemoryInfo(handle).used / _MIB
            except nvml.NVMLError as exc:
                log.warning("NVML could not read memory of GPU %d: %s", index, exc)
    return result


def wait_gpu_released(
    pids: Sequence[int],
    indices: Sequence[int],
    timeout_s: float,
    *,
    baseline_used_mib: Mapping[int, float] | None = None,
    slack_mib: float = 1024.0,
    poll_s: float = 0.25,
) -> bool:
    """Wait until none of ``pids`` is listed on ``indices`` and, given a baseline, memory fell back to it.

    A killed process leaves NVML a while after it is reaped (sglang #36589, #39545); starting the next
    server before that runs it out of memory. Returns False when ``timeout_s`` passed first.
    """
    wanted = set(pids)
    deadline = time.monotonic() + timeout_s
    while True:
        listed = gpu_processes(indices)
        busy = wanted.intersection(pid for plist in listed.values() for pid in plist)
        over = {}
        if baseline_used_mib:
            used = gpu_memory_used_mib(list(baseline_used_mib))
            over = {i: u for i, u in used.items() if u > baseline_used_mib[i] + slack_mib}
        if not busy and not over:
            return True
        if time.monotonic() >= deadline:
            log.warning("GPUs %s not released after %.0f s: pids %s, memory over baseline %s",
                        list(indices), timeout_s, sorted(busy), over)
            return False
        time.sleep(poll_s)
