"""The command line that serves a model with the real-SGLang CPU build.

The flags the CPU build needs beside the scenario's own (found by trying, 0.5.21): ``--device cpu``;
``--attention-backend torch_native`` (the attention that runs in plain torch); ``--disable-cuda-graph``;
``--max-total-tokens`` so the KV pool is sized for a tiny model rather than a share of the host's RAM, and a
``--mem-fraction-static`` of 0.6: the CPU path budgets against the memory free at start, and on a busy machine
0.2 left "no GPU memory for the KV cache" (0.5.14 ``model_runner_kv_cache_mixin.py:110``, seen in a fresh-clone
``make test``); the token cap keeps the pool small whatever the fraction. The server is bound to loopback.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.build.environments import venv_python

__all__ = ["CPU_SERVER_FLAGS", "server_argv"]

CPU_SERVER_FLAGS: tuple[str, ...] = (
    "--device", "cpu",
    "--attention-backend", "torch_native",
    "--disable-cuda-graph",
    "--mem-fraction-static", "0.6",
    "--max-total-tokens", "4096",
)  # fmt: skip


def server_argv(venv: Path, model: Path, port: int, extra: Sequence[str] = (), *, host: str = "127.0.0.1",
                defaults: Sequence[str] = CPU_SERVER_FLAGS) -> list[str]:
    """``python -m sglang.launch_server`` of the build in ``venv`` serving ``model`` on ``host:port``.

    ``extra`` comes last, so a flag given there (``--attention-backend intel_amx``) overrides a default.
    """
    flags = list(defaults)
    given = {flag for flag in extra if flag.startswith("--")}
    filtered: list[str] = []
    skip_value = False
    for index, item in enumerate(flags):
        if skip_value:
            skip_value = False
            continue
        if item in given:
            skip_value = index + 1 < len(flags) and not flags[index + 1].startswith("--")
            continue
        filtered.append(item)
    return [str(venv_python(venv)), "-m", "sglang.launch_server", "--model-path", str(model), *filtered,
            "--host", host, "--port", str(port), *extra]
