"""GPU requirement checks on injected inventories, and NVML behaviour on a host without a driver."""

from __future__ import annotations

import os
import time

import pytest

from harness.server.hardware import (
    Gpu,
    gpu_processes,
    host_info,
    inventory,
    requirement_gap,
    select_visible,
    wait_gpu_released,
)
from harness.util.errors import UserError

L40S = [Gpu(i, f"GPU-aaaa{i}-1111", "NVIDIA L40S", 44.99, "8.9") for i in range(4)]
MIXED = [
    Gpu(0, "GPU-0a1b", "NVIDIA H100 80GB HBM3", 79.65, "9.0"),
    Gpu(1, "GPU-1c2d", "NVIDIA L4", 22.49, "8.9"),
    Gpu(2, "GPU-2e3f", "NVIDIA A100-SXM4-40GB", 39.5, "8.0"),
    Gpu(3, "GPU-3f40", "NVIDIA B200", 179.0, "10.0"),
]


def test_requirement_met() -> None:
    assert requirement_gap(L40S, count=4, name_pattern="L40S", min_memory_gib=44, min_compute_capability="8.9") is None
    assert requirement_gap(L40S, count=2) is None
    assert requirement_gap(MIXED, count=1, name_pattern="h100|h200") is None


def test_requirement_gap_names_what_is_missing() -> None:
    gap = requirement_gap(MIXED, count=4, name_pattern="L40S", min_memory_gib=44, min_compute_capability=None)
    assert gap is not None
    assert gap.startswith("needs 4 GPUs matching L40S with >= 44 GiB, found 0")
    assert "NVIDIA L4 22 GiB" in gap
    gap = requirement_gap([], count=1)
    assert gap is not None and gap.startswith("needs 1 GPU, found 0 (host has: no GPUs)")


def test_name_pattern_is_case_insensitive_search() -> None:
    assert requirement_gap(L40S, count=4, name_pattern="l40s") is None
    assert requirement_gap(L40S, count=1, name_pattern="^L40S") is not None  # search, not a prefix hack


def test_memory_and_compute_capability_bounds() -> None:
    # Compute capability compares as numbers: 10.0 is newer than 9.0, though "10.0" < "9.0" as text.
    assert requirement_gap(MIXED, count=2, min_compute_capability="9.0") is None
    gap = requirement_gap(MIXED, count=3, min_compute_capability="9.0")
    assert gap is not None and "found 2" in gap
    assert requirement_gap(MIXED, count=2, min_memory_gib=79) is None
    gap = requirement_gap(MIXED, count=3, min_memory_gib=79.65)
    assert gap is not None and "found 2" in gap
    gap = requirement_gap(MIXED, count=1, name_pattern="L4$", min_compute_capability="9.0")
    assert gap is not None and "compute capability >= 9.0" in gap


def test_bad_bounds_are_user_errors() -> None:
    with pytest.raises(UserError, match="not a valid regular expression"):
        requirement_gap(MIXED, count=1, name_pattern="L40S(")
    with pytest.raises(UserError, match="MAJOR.MINOR"):
        requirement_gap(MIXED, count=1, min_compute_capability="hopper")


@pytest.mark.parametrize(
    ("visible", "expected"),
    [
        (None, [0, 1, 2, 3]),
        ("", []),
        ("2,0", [2, 0]),
        ("GPU-1c2d", [1]),
        ("3f40,1", [3, 1]),  # UUIDs may be given without the GPU- prefix
        ("1,7,2", [1]),  # CUDA stops at the first entry that names no device
        ("1,1", [1]),
    ],
)
def test_cuda_visible_devices(visible: str | None, expected: list[int]) -> None:
    assert [g.index for g in select_visible(MIXED, visible)] == expected


def test_no_driver_means_empty_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    # This test host has no NVIDIA driver; on a GPU host the answers are real and only checked for shape.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    gpus = inventory()
    assert isinstance(gpus, list) and all(isinstance(g, Gpu) for g in gpus)
    info = host_info()
    assert info.hostname and info.python and info.cpu_count and info.python_executable
    assert info.cuda_visible_devices == "0"
    assert info.gpu_names == tuple(g.name for g in gpus)
    if not gpus:
        assert info.driver_version is None
        assert gpu_processes([0, 1]) == {0: [], 1: []}
        began = time.monotonic()
        assert wait_gpu_released([os.getpid()], [0], timeout_s=5) is True
        assert time.monotonic() - began < 1


def test_cpu_model_reads_proc_cpuinfo_in_its_x86_and_arm_shapes(tmp_path) -> None:
    from harness.server.hardware import cpu_model

    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC  7763 64-Core Processor\n"
                   "processor\t: 1\nmodel name\t: AMD EPYC  7763 64-Core Processor\n")
    assert cpu_model(str(x86)) == "AMD EPYC 7763 64-Core Processor"
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nBogoMIPS\t: 50.00\nCPU part\t: 0xd0c\n\nHardware\t: Neoverse-N1 board\n")
    assert cpu_model(str(arm)) == "Neoverse-N1 board"
    bare = tmp_path / "bare"
    bare.write_text("processor\t: 0\nCPU part\t: 0xd0c\n")
    assert cpu_model(str(bare)) is None
    assert cpu_model(str(tmp_path / "missing")) is None
    with open("/proc/cpuinfo") as fh:  # this machine's own model, as the kernel names it
        names = [line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")]
    if names:
        assert cpu_model() == " ".join(names[0].split())


def test_host_info_names_the_cpu_and_the_driver_cuda_version_as_nvidia_smi_prints_it() -> None:
    from harness.server.hardware import cpu_model, cuda_driver_version, host_info

    # NVML encodes the CUDA driver version as 1000 * major + 10 * minor (nvml.h NVML_CUDA_DRIVER_VERSION_MAJOR/MINOR).
    assert [cuda_driver_version(v) for v in (12040, 11080, 13000)] == ["12.4", "11.8", "13.0"]
    info = host_info()
    assert info.cpu == cpu_model()
    if not info.gpus:
        assert info.cuda_version is None  # no driver, no CUDA version to invent
