"""The CPU-gap switch (``standins/sglang_cpu_gaps.py``) on stand-in modules of the two SGLang layouts.

A fresh interpreter with the stand-ins' root on PYTHONPATH (so ``sitecustomize`` installs the hook) imports a
made-up ``sglang`` package: a module shaped like 0.5.14/0.5.15's (device flags, no CPU branch) gets ``_is_cuda``
and the tree-build name; one shaped like 0.5.16 on (``_is_cpu`` defined) is left exactly as it is.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from harness.build.sglang_cpu import STANDINS_DIR

_MODULE = """
_is_cuda = False
_is_hip = False
"""
_MODULE_WITH_CPU_BRANCH = _MODULE + "_is_cpu = True\n"
_PROBE = """
import json, sys
import sglang.srt.speculative.eagle_utils as e
import sglang.srt.speculative.triton_ops.cache_locs as c
print(json.dumps({"eagle_cuda": e._is_cuda, "cache_cuda": c._is_cuda,
                  "tree": getattr(e, "sgl_build_tree_kernel_efficient", None) is not None}))
"""


def _fake_sglang(root: Path, *, cpu_branch: bool) -> None:
    spec = root / "sglang" / "srt" / "speculative"
    (spec / "triton_ops").mkdir(parents=True)
    for package in (root / "sglang", root / "sglang" / "srt", spec, spec / "triton_ops"):
        (package / "__init__.py").write_text("", encoding="utf-8")
    body = _MODULE_WITH_CPU_BRANCH if cpu_branch else _MODULE
    (spec / "eagle_utils.py").write_text(body, encoding="utf-8")
    (spec / "triton_ops" / "cache_locs.py").write_text(body, encoding="utf-8")


def _probe(root: Path) -> tuple[dict[str, bool], str]:
    env = {"PYTHONPATH": f"{STANDINS_DIR}:{root}", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_PROBE)], capture_output=True, text=True, env=env,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_a_module_without_a_cpu_branch_takes_the_gpu_branch(tmp_path: Path) -> None:
    _fake_sglang(tmp_path, cpu_branch=False)
    seen, stderr = _probe(tmp_path)
    assert seen == {"eagle_cuda": True, "cache_cuda": True, "tree": True}
    assert stderr.count("[sglang-cpu-build] CPU gap:") == 2


def test_a_module_with_a_cpu_branch_is_left_alone(tmp_path: Path) -> None:
    _fake_sglang(tmp_path, cpu_branch=True)
    seen, stderr = _probe(tmp_path)
    assert seen == {"eagle_cuda": False, "cache_cuda": False, "tree": False}
    assert "CPU gap" not in stderr
