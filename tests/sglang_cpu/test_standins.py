"""The import stand-ins of the real-SGLang CPU build, run in a fresh interpreter with only them on PYTHONPATH.

The harness's own interpreter has the CPU build of torch 2.13.0, the torch the CPU build serves with, so what
torch does with the stand-ins (its ``has_triton()`` probe, Inductor's triton imports, the flop counter) is
checked here without an SGLang environment.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from harness.build.sglang_cpu import STANDINS_DIR

pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # a fresh interpreter importing torch per test


def _run(code: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(STANDINS_DIR), "PATH": "/usr/bin:/bin"}, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_triton_names_are_real_types_torch_accepts() -> None:
    out = _run("""
        import json, triton, triton.language as tl
        from triton.runtime.jit import JITFunction
        from triton.runtime.autotuner import Autotuner, OutOfResources
        import torch.utils.flop_counter as fc  # imports triton's JITFunction for isinstance
        import torch._inductor.runtime.triton_compat as compat  # imports OutOfResources, Config, CompiledKernel...
        from torch.utils._triton import has_triton, get_triton_version
        print(json.dumps({"jit_is_type": isinstance(JITFunction, type), "dtype": isinstance(tl.float32, tl.dtype),
                          "fc": fc._JITFunction is JITFunction, "has_triton": has_triton(),
                          "version": list(get_triton_version()), "oor": issubclass(OutOfResources, Exception),
                          "cdiv": triton.cdiv(7, 2), "p2": triton.next_power_of_2(33)}))
    """)
    assert out == {"jit_is_type": True, "dtype": True, "fc": True, "has_triton": False, "version": [3, 6],
                   "oor": True, "cdiv": 4, "p2": 64}


def test_triton_driver_has_no_active_backend() -> None:
    out = _run("""
        import json, triton
        try:
            triton.runtime.driver.active.get_current_target()
            print(json.dumps({"raised": None}))
        except RuntimeError as exc:
            print(json.dumps({"raised": str(exc)}))
    """)
    assert out["raised"] == "0 active drivers ([]). There should only be one."


def test_triton_launch_runs_the_registered_port_or_names_the_kernel() -> None:
    out = _run("""
        import json, triton, triton.language as tl, sglang_cpu_ports

        @triton.jit
        def _standin_test_add(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            pass

        @triton.autotune(configs=[triton.Config({"BLOCK": 4})], key=["n"])
        @triton.jit
        def _standin_test_missing(x_ptr, n, BLOCK: tl.constexpr):
            pass

        seen = []

        @sglang_cpu_ports.register("triton._standin_test_add")
        def port(grid, x, y, n, BLOCK):
            seen.append([list(grid), n, BLOCK])
            return x + y

        result = _standin_test_add[(3,)](1, 2, 5, BLOCK=8)
        try:
            _standin_test_missing[(1,)](1, 2)
            missing = None
        except NotImplementedError as exc:
            missing = str(exc)
        print(json.dumps({"result": result, "seen": seen, "missing": missing}))
    """)
    assert out["result"] == 3 and out["seen"] == [[[3], 5, 8]]
    assert "'_standin_test_missing'" in str(out["missing"])


def test_sgl_kernel_any_name_imports_and_a_call_without_port_names_itself() -> None:
    out = _run("""
        import json, torch, sgl_kernel, sglang_cpu_ports
        from sgl_kernel import some_cuda_only_op
        from sgl_kernel.scalar_types import scalar_types
        from sgl_kernel import scalar_types as st
        same = st.uint4b8 is st.uint4b8
        try:
            some_cuda_only_op(1)
            raised = None
        except NotImplementedError as exc:
            raised = str(exc)
        print(json.dumps({"same": same, "raised": raised, "in_torch_ops": hasattr(torch.ops.sgl_kernel, "some_cuda_only_op"),
                          "ported_in_torch_ops": sorted(n[len("sgl_kernel."):] for n in sglang_cpu_ports.REGISTRY
                                                        if n.startswith("sgl_kernel.")
                                                        and not hasattr(torch.ops.sgl_kernel, n[len("sgl_kernel."):]))}))
    """)
    assert out["same"] is True
    assert "sgl_kernel.some_cuda_only_op" in str(out["raised"]) and "no plain-torch port" in str(out["raised"])
    assert out["in_torch_ops"] is False, "an op without a port must be absent from torch.ops (SGLang probes with hasattr)"
    assert out["ported_in_torch_ops"] == [], "every sgl_kernel port is also torch.ops.sgl_kernel.<op>"


def test_torchvision_imports_and_refuses_to_run() -> None:
    out = _run("""
        import json
        from torchvision.io import decode_jpeg
        try:
            decode_jpeg(b"")
            raised = None
        except NotImplementedError as exc:
            raised = str(exc)
        print(json.dumps({"raised": raised}))
    """)
    assert "torchvision.io.decode_jpeg" in str(out["raised"])


def test_ports_package_imports_without_the_harness() -> None:
    out = _run("""
        import json, sys, sglang_cpu_ports
        print(json.dumps({"harness": any(m == "harness" or m.startswith("harness.") for m in sys.modules),
                          "names_ok": all(n.startswith(("triton.", "sgl_kernel.")) for n in sglang_cpu_ports.REGISTRY)}))
    """)
    assert out == {"harness": False, "names_ok": True}
