"""A fork server for the fuzz tests: ``sglang-repro validate FILE`` (or any command line, ``argv``) per
request, each in a forked child bounded in memory (RLIMIT_AS), CPU time (RLIMIT_CPU) and wall time (alarm).

The harness is imported once, here; a fork per example costs milliseconds where a fresh
interpreter costs a second. Protocol: one JSON request per stdin line,
``{"file": PATH, "cwd": DIR, "out": DIR}`` or ``{"argv": [...], "cwd": DIR, "out": DIR}`` (optionally
``"env": {...}`` set in the child); one JSON answer per stdout line with the exit status
(negative: killed by that signal), the child's CPU seconds, wall seconds and its stdout/stderr.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

CPU_LIMIT_S = 10
WALL_LIMIT_S = 20
MEMORY_HEADROOM = 1 << 30  # address space the child may add to what the worker already maps


def _vm_size() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def _child(argv: list[str], cwd: str, out: str, env: dict[str, str]) -> None:
    limit = _vm_size() + MEMORY_HEADROOM
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_LIMIT_S, CPU_LIMIT_S))
    signal.alarm(WALL_LIMIT_S)
    os.chdir(cwd)
    os.environ.update(env)
    for fd, name in ((1, "stdout"), (2, "stderr")):
        target = os.open(os.path.join(out, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), write_through=True)
    sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", closefd=False), write_through=True)
    code = 99
    try:
        from harness.cli import main

        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 98
    except BaseException:  # anything escaping main is the bug this records, shown as a traceback
        traceback.print_exc()
        code = 99
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _serve(request: dict[str, Any]) -> dict[str, object]:
    began = time.monotonic()
    pid = os.fork()
    if pid == 0:
        argv = request.get("argv") or ["validate", request["file"]]
        _child(list(argv), request["cwd"], request["out"], dict(request.get("env") or {}))
    _, status, usage = os.wait4(pid, 0)
    wall = time.monotonic() - began
    code = os.waitstatus_to_exitcode(status)
    texts = {}
    for name in ("stdout", "stderr"):
        path = Path(request["out"], name)
        texts[name] = path.read_bytes()[:1_000_000].decode("utf-8", "replace") if path.exists() else ""
    return {"code": code, "cpu": usage.ru_utime + usage.ru_stime, "wall": wall, **texts}


def main() -> int:
    warm = Path(sys.argv[1])  # a valid scenario: import everything validate needs before forking
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        from harness.cli import main as cli_main

        cli_main(["validate", str(warm)])
        for name in sys.argv[2:]:  # more modules a fuzz test's commands import, loaded once before forking
            __import__(name)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(_serve(json.loads(line))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
