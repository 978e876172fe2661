"""Run sglang 0.5.14's own eager decode input path on CPU and return the traceback it prints.

What runs is the release's code, not a copy: ``cuda_graph_buffer_registry`` is imported from the
cached package (``build_eager_registry``, ``fill_from``, ``_grouped_foreach_copy_``), and
``EagerRunner.execute -> _execute_decode -> load_batch`` are compiled from the package's own
``runner/eager_runner.py`` (that module's imports need packages a --no-deps environment lacks, so its
three methods are taken from its syntax tree, keeping the file name and line numbers, and bound to a
stand-in runner). The forward batch is the state #28264 describes: a one-request decode (one bonus
token) that still carries the prefill's ``out_cache_loc`` of N slots.

``device="cpu"``: ``fill_from`` copies CPU tensors one by one (``dst.copy_``), so the traceback ends in
``fill_from`` with no ``_grouped_foreach_copy_`` frame, like a log that lost the raising helper.
``device="meta"``: a device that is not the CPU takes the grouped ``torch._foreach_copy_`` path a GPU
takes; the meta device computes shapes only, so it runs on any machine.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from tests.real_sglang import RealSGLang

__all__ = ["SCRIPT", "real_fill_from_traceback"]

SCRIPT = r'''
import __future__, ast, contextlib, os, sys, types
from dataclasses import replace
import torch
from sglang.srt.environ import envs
import sglang.srt.model_executor.cuda_graph_buffer_registry as registry_module
from sglang.srt.model_executor.cuda_graph_buffer_registry import build_eager_registry

device, prompt_len = torch.device(sys.argv[1]), int(sys.argv[2])
path = os.path.join(os.path.dirname(registry_module.__file__), "runner", "eager_runner.py")
tree = ast.parse(open(path, encoding="utf-8").read(), path)
cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "EagerRunner")
wanted = ("execute", "_resolve_decode_pdmux", "_execute_decode", "load_batch")
methods = ast.Module(body=[n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name in wanted], type_ignores=[])
namespace = {"envs": envs, "replace": replace, "contextlib": contextlib, "torch": torch}
exec(compile(methods, path, "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True), namespace)

eager_runner = types.SimpleNamespace(
    model_runner=types.SimpleNamespace(server_args=types.SimpleNamespace(enable_pdmux=False), attn_backend=None),
    _eager_registry=build_eager_registry(device=device, max_bs=8, max_num_token=4096, cache_loc_dtype=torch.int64),
)
for name in wanted:
    setattr(eager_runner, name, types.MethodType(namespace[name], eager_runner))

decode = types.SimpleNamespace(is_decode=lambda: True, is_idle=lambda: False)
forward_batch = types.SimpleNamespace(
    forward_mode=decode, batch_size=1,
    input_ids=torch.zeros(1, dtype=torch.int64, device=device),            # the bonus token
    positions=torch.zeros(1, dtype=torch.int64, device=device),
    out_cache_loc=torch.arange(prompt_len, dtype=torch.int64, device=device),  # stale: the prefill's slots
    req_pool_indices=torch.zeros(1, dtype=torch.int64, device=device),
    seq_lens=torch.full((1,), prompt_len + 1, dtype=torch.int64, device=device),
    seq_lens_cpu=torch.full((1,), prompt_len + 1, dtype=torch.int64),
    mrope_positions=None,
)
eager_runner.execute(forward_batch)
'''


def real_fill_from_traceback(release: RealSGLang, *, device: str = "cpu", prompt_len: int = 276) -> str:
    """The stderr of the script above in ``release``'s environment; AssertionError unless it failed.
    The script runs from a file, so its own frame prints its code line, as a server's outer frames do."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "eager_decode_with_stale_out_cache_loc.py"
        script.write_text(SCRIPT, encoding="utf-8")
        done = subprocess.run([release.python, str(script), device, str(prompt_len)],
                              capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 1, f"expected the real fill_from to raise; rc={done.returncode}\n{done.stderr}"
    return done.stderr
