"""Run a client's `__main__` after its imports, and record the CPU it used for the work alone.

Usage: python _measure_cpu.py RESULT_JSON PREIMPORTS TARGET [ARGS...]

PREIMPORTS is a comma-separated list of modules imported first (not measured); TARGET is a module name
(run like `python -m`) or a path to a `.py` file (run like `python FILE`). The CPU seconds (user + system,
all threads, plus waited-for children) from just before TARGET runs until it returns are written to
RESULT_JSON with its exit code. Standard library only: it runs in whichever interpreter the client needs
(the harness's, or a separate environment with sglang).
"""

from __future__ import annotations

import importlib
import json
import resource
import runpy
import sys
import time
from pathlib import Path

__all__: list[str] = []


def _cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> int:
    result_path, preimports, target, *args = sys.argv[1:]
    is_file = target.endswith(".py")
    if is_file:
        sys.path.insert(0, str(Path(target).resolve().parent))  # as `python FILE` would
    for name in filter(None, preimports.split(",")):
        importlib.import_module(name)
    sys.argv = [target, *args]
    cpu0, wall0 = _cpu(), time.monotonic()
    code: object = 0
    try:
        if is_file:
            runpy.run_path(target, run_name="__main__")
        else:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
    cpu, wall = _cpu() - cpu0, time.monotonic() - wall0
    exit_code = code if isinstance(code, int) else (0 if code is None else 1)
    Path(result_path).write_text(json.dumps({"cpu_s": cpu, "wall_s": wall, "exit_code": exit_code}))
    return exit_code


if __name__ == "__main__":
    raise SystemExit(main())
