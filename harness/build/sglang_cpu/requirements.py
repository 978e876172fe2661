"""What the real-SGLang CPU build installs beside the wheel: its pure-Python dependencies at its own pins.

Read from the wheel's ``METADATA`` (never guessed): every unconditional ``Requires-Dist`` is installed at the
wheel's own specifier, except the GPU stack (CUDA kernels, triton, torchvision, flashinfer, sgl-kernel...),
which the CPU build replaces by stand-ins, and torch, which is the CPU build on disk. The constraints file pins
each skipped GPU package to a version that does not exist, so a dependency that would pull one fails at once
instead of downloading several GB.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from harness.util.errors import InfraError

__all__ = ["CPU_TORCH", "EXTRA_PACKAGES", "NO_DEPS_PACKAGES", "CpuRequirements", "constraints_text", "cpu_requirements"]

# The CPU build of torch on these machines' disk; 0.5.18-0.5.21 pin exactly it.
CPU_TORCH = "2.13.0"
# GPU packages: CUDA kernels and the GPU builds of torch's companions. Each is pinned away (constraints_text).
_GPU = re.compile(
    r"^(triton|triton-kernels|torchvision|torchaudio|torchcodec|torch-memory-saver|torchao|flashinfer(-.*)?|sgl-.*|"
    r"sglang-kernel|nvidia-.*|cuda-.*|cupy(-.*)?|nvshmem.*|flash-attn(-.*)?|humming-kernels|quack-kernels|tilelang|"
    r"tokenspeed-mla|deep-.*|kernels|timm|decord.*|av|xformers|vllm|aiter|mooncake.*|nixl.*)$"
)
# Needed on the CPU path although a release may not list them (found by trying: jsonschema by outlines'
# json-schema path, soundfile and openai-harmony by the OpenAI server's imports, apache-tvm-ffi by xgrammar).
EXTRA_PACKAGES = ("jsonschema", "soundfile", "openai-harmony", "apache-tvm-ffi")
# Installed --no-deps: xgrammar lists triton as a dependency on Linux x86_64 but its grammar engine is C++ on CPU.
NO_DEPS_PACKAGES = ("xgrammar",)
# Names the constraints file pins to a version that does not exist (pip refuses them at once).
_PINNED_AWAY = ("triton", "torchvision", "torchaudio", "torchcodec", "torch-memory-saver", "flashinfer-python",
                "flashinfer-cubin", "flashinfer-jit-cache", "sgl-kernel", "sglang-kernel", "cuda-python", "cuda-bindings",
                "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu13", "nvidia-cudnn-cu12", "nvidia-cublas-cu12",
                "nvidia-nccl-cu12", "nvidia-cutlass-dsl", "flash-attn-4", "tilelang", "timm")
_NOWHERE = "0.0.0.dev0"


@dataclass(frozen=True)
class CpuRequirements:
    """The wheel's dependencies sorted for the CPU build: installed at its pins, installed ``--no-deps``, skipped."""

    version: str
    torch_pin: str  # what the wheel asks for (e.g. ``torch==2.11.0``); the build installs CPU_TORCH whatever it says
    install: tuple[str, ...]
    no_deps: tuple[str, ...]
    skipped: tuple[str, ...]


def _metadata(wheel: Path) -> str:
    try:
        with zipfile.ZipFile(wheel) as archive:
            name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
            return archive.read(name).decode("utf-8", errors="replace")
    except (OSError, zipfile.BadZipFile, StopIteration) as exc:
        raise InfraError(f"{wheel}: cannot read the wheel's METADATA ({exc or 'none in the wheel'})") from exc


def cpu_requirements(wheel: Path) -> CpuRequirements:
    """Sort the wheel's unconditional requirements (markers evaluated for this machine, no extras)."""
    text = _metadata(wheel)
    version = re.search(r"^Version:\s*(\S+)", text, re.M)
    install: list[str] = []
    no_deps: list[str] = []
    skipped: list[str] = []
    seen: set[str] = set()
    torch_pin = "torch"
    for line in text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        try:
            req = Requirement(line.partition(":")[2].strip())
        except InvalidRequirement as exc:
            raise InfraError(f"{wheel}: METADATA line {line!r} is not a requirement ({exc})") from exc
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(req.name)
        pinned = f"{name}{req.specifier}"
        if name == "torch":
            torch_pin = pinned
        if name == "torch" or _GPU.match(name):
            skipped.append(pinned)
        elif name in NO_DEPS_PACKAGES:
            no_deps.append(pinned)
        else:
            install.append(pinned)
        seen.add(name)
    install += [extra for extra in EXTRA_PACKAGES if extra not in seen]
    no_deps += [name for name in NO_DEPS_PACKAGES if name not in seen]
    return CpuRequirements(version.group(1) if version else "?", torch_pin, tuple(install), tuple(no_deps), tuple(skipped))


def constraints_text(torch: str = CPU_TORCH) -> str:
    """A pip constraints file: torch at the CPU build on disk, every GPU package at a version that does not exist."""
    lines = ["# real-SGLang CPU build (sglang-repro): a GPU package pulled by any dependency fails here at once",
             f"torch=={torch}"]
    lines += [f"{name}=={_NOWHERE}" for name in _PINNED_AWAY]
    return "\n".join(lines) + "\n"
