"""``python -m sglang.check_env`` in a build's own interpreter, kept with the run as ``check_env.json``.

SGLang's bug template asks for its output ("Please provide necessary environment information here with
``python3 -m sglang.check_env``", .github/ISSUE_TEMPLATE/1-bug-report.yml). It is taken at run time, on the
machine that ran the server, so an upstream report written later from the run folder carries what that machine
was. It reads the GPUs through torch and nvidia-smi: on a machine without an accelerator it cannot run (sglang
0.5.14 ``check_env.py:584-595`` picks an environment class by the device torch sees and names none for a CPU),
and the record says so with its last line. The reference server is not SGLang and has no ``check_env``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.build.resolve import Build
from harness.util.atomic import write_atomic
from harness.util.bounded_read import ReadRefused, read_json
from harness.util.clock import now_iso
from harness.util.errors import InfraError
from harness.util.proc import run_bounded
from harness.util.redact import redact_everywhere

__all__ = ["CHECK_ENV_FILE", "CHECK_ENV_TIMEOUT_S", "capture_check_env", "read_check_env"]

CHECK_ENV_FILE = "check_env.json"
CHECK_ENV_TIMEOUT_S = 120.0  # it imports torch and asks nvidia-smi and nvcc; a hung driver must not hold the run
_OUTPUT_LIMIT = 64 << 10
# Once per build and process: the trials of a night on one build share a machine, and each import of torch and
# sglang costs seconds; what it reports (versions, driver, topology) does not change between them.
_TAKEN: dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, Any]] = {}


def _take(build: Build) -> dict[str, Any]:
    key = (build.python, tuple(sorted(build.env.items())))
    if key not in _TAKEN:
        try:
            done = run_bounded([build.python, "-m", "sglang.check_env"], timeout=CHECK_ENV_TIMEOUT_S, env=dict(build.env))
            code: int | None = done.returncode
            output = (done.stdout or "") + (("\n" + done.stderr) if done.stderr and done.returncode else "")
        except (InfraError, OSError) as exc:
            code, output = None, str(exc)
        _TAKEN[key] = {"argv": ["python", "-m", "sglang.check_env"], "exit_code": code, "ran_at": now_iso(),
                       "output": redact_everywhere(output[-_OUTPUT_LIMIT:])}
    return _TAKEN[key]


def capture_check_env(build: Build, run_dir: Path) -> Path | None:
    """Run it for ``build`` (once per process) and write ``run_dir/check_env.json``; None (nothing written) for the
    reference server."""
    if build.is_reference:
        return None
    data = _take(build)
    path = run_dir / CHECK_ENV_FILE
    write_atomic(path, json.dumps(data, indent=2) + "\n")
    return path


def read_check_env(run_dir: Path) -> dict[str, Any] | None:
    """What a run kept of it, or None when the run has none (the reference server, an older harness)."""
    try:
        data = read_json(run_dir / CHECK_ENV_FILE, "record")
    except (ReadRefused, OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "output" in data else None
