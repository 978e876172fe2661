"""The real-SGLang CPU build: the real ``sglang`` wheel serving on the CPU with plain-torch kernels.

``pip:sglang==X,deps=cpu`` is this build. Everything between the HTTP edge and the kernels is SGLang's own
code (scheduler, tokenizer manager, radix cache, memory pools, metrics, warm-up, signal handling); the GPU
packages it imports are stand-ins (``standins/``, a ``PYTHONPATH`` root) and the few kernels its CPU path
launches are plain-torch ports (``standins/sglang_cpu_ports``). Label: :data:`LABEL`, never GPU performance.
"""

from __future__ import annotations

from harness.build.sglang_cpu.environment import LABEL, STANDINS_DIR, ensure_cpu_env, server_environment

__all__ = ["LABEL", "STANDINS_DIR", "ensure_cpu_env", "server_environment"]
