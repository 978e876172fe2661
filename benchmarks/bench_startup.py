"""Start-up costs: each quick CLI command beside a bare interpreter, and the reference server's start to
ready beside a bare torch import.

Usage: python benchmarks/bench_startup.py [--rounds 7] [--server-rounds 5] [--baseline CHECKOUT] [--out FILE]

* CLI: wall time of `python -m harness COMMAND ...` (a fresh process each time, output discarded) for
  `--help`, `validate`, `list`, `triage` and `schema`, beside `python -c pass` in the same round; rounds
  interleave the peer and every command, so load on the machine hits all alike.
* Reference server: wall time from starting `python -m harness.sim.server` (post-fix, graph draft path,
  the case `tokens=276,path=graph`) to its ready line on stdout, beside `python -c "import torch"`
  started in the same round. The scheduler child cannot serve before torch is imported, so the bare
  import is the floor a start can approach only by overlapping the rest with it.

Each is reported twice: wall time (`*_wall`) and CPU time (`*_cpu`: user + system of the process, or of
the server's processes when it is ready). On a shared machine the CPU time is the steadier of the two.

With `--baseline CHECKOUT` (another checkout of this repository, e.g. `git worktree add --detach
/tmp/base main`), the same commands and server starts run from that checkout too, in the same rounds,
so a change is measured against its base under the same load.

The reference server is a model of SGLang's mechanism, not SGLang.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psutil
from _common import REPO, SERVER_LABEL, emit, quiet_logging, ratio, sim_flags, summary

from harness.server.lease import lease_port

__all__ = ["main", "run_benchmark"]

SCENARIO = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"
LOG = REPO / "fixtures" / "logs" / "clean.log"
COMMANDS: dict[str, list[str]] = {
    "--help": ["--help"],
    "validate": ["validate", str(SCENARIO)],
    "list": ["list", str(SCENARIO)],
    "triage": ["triage", str(LOG)],
    "schema": ["schema"],
}
READY = "The server is fired up and ready to roll!"
SERVER_STARTUP_S = 180.0


def _env(root: Path) -> dict[str, str]:
    # The harness from `root`, whatever the caller's PYTHONPATH.
    return {**os.environ, "PYTHONPATH": str(root), "PYTHONUNBUFFERED": "1"}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(argv: list[str], root: Path = REPO) -> tuple[float, float]:
    """(wall, CPU) seconds of one process run to its end."""
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(argv, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env=_env(root), cwd=root, timeout=120)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{argv[2:4]} exited {done.returncode}: {done.stderr[-500:]}")
    return elapsed, _children_cpu() - cpu


def _tree_cpu(pid: int) -> float:
    # CPU of the server's processes so far (the front and its scheduler child are both alive at ready).
    parent = psutil.Process(pid)
    total = 0.0
    for proc in [parent, *parent.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = proc.cpu_times()
            total += times.user + times.system
    return total


def _server_start_to_ready(log_path: Path, root: Path = REPO) -> tuple[float, float]:
    """(wall, CPU) seconds from starting the server to its ready line."""
    with ExitStack() as stack:
        port = stack.enter_context(lease_port("127.0.0.1")).port
        argv = sim_flags("post-fix", "graph", port)
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(root),
                                cwd=root, start_new_session=True)
        try:
            assert proc.stdout is not None
            with log_path.open("w", encoding="utf-8") as log:
                for line in proc.stdout:
                    log.write(line)
                    if READY in line:
                        return time.perf_counter() - started, _tree_cpu(proc.pid)
                    if time.perf_counter() - started > SERVER_STARTUP_S:
                        break
            raise RuntimeError(f"the reference server never became ready; see {log_path}")
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def run_benchmark(rounds: int, server_rounds: int, work: Path, baseline: Path | None = None) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    roots = {"this": REPO, **({"baseline": baseline} if baseline else {})}
    peer: list[tuple[float, float]] = []
    cli: dict[str, dict[str, list[tuple[float, float]]]] = {side: {name: [] for name in COMMANDS} for side in roots}
    for _ in range(rounds):
        peer.append(_timed([py, "-c", "pass"]))
        for name, args in COMMANDS.items():
            for side, root in roots.items():
                cli[side][name].append(_timed([py, "-m", "harness", *_args(args, root)], root))
    torch_import: list[tuple[float, float]] = []
    server: dict[str, list[tuple[float, float]]] = {side: [] for side in roots}
    for i in range(server_rounds):
        torch_import.append(_timed([py, "-c", "import torch"]))
        for side, root in roots.items():
            server[side].append(_server_start_to_ready(work / f"server-{side}-{i}.log", root))
    result: dict[str, Any] = {
        "server": SERVER_LABEL,
        "machine": {"cpus": os.cpu_count(), "loadavg_at_end": [round(x, 2) for x in os.getloadavg()]},
    }
    for side, root in roots.items():
        result[side] = {"checkout": str(root)}
        for clock, k in (("wall", 0), ("cpu", 1)):
            peer_s = summary([v[k] for v in peer])
            cli_s = {name: summary([v[k] for v in values]) for name, values in cli[side].items()}
            torch_s = summary([v[k] for v in torch_import])
            server_s = summary([v[k] for v in server[side]])
            result[side][f"cli_{clock}"] = {
                "peer": "python -c pass",
                "peer_ms": peer_s,
                "commands_ms": cli_s,
                "ratio_over_peer_p50": {name: ratio(s["p50"], peer_s["p50"]) for name, s in cli_s.items()},
            }
            result[side][f"reference_server_{clock}"] = {
                "case": "tokens=276,path=graph on sim:post-fix",
                "peer": 'python -c "import torch"',
                "bare_torch_import_ms": torch_s,
                "start_to_ready_ms": server_s,
                "ratio_server_over_torch_p50": ratio(server_s["p50"], torch_s["p50"]),
            }
    return result


def _args(args: list[str], root: Path) -> list[str]:
    # Paths of this checkout's fixtures, read from `root` when measuring another checkout.
    return [str(root / Path(a).relative_to(REPO)) if a.startswith(str(REPO)) else a for a in args]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="CLI rounds (default 7)")
    parser.add_argument("--server-rounds", type=int, default=5, help="reference-server rounds (default 5)")
    parser.add_argument("--work", type=Path, default=Path("reports/benchmarks/startup"), help="folder for server logs")
    parser.add_argument("--baseline", type=Path, default=None, metavar="CHECKOUT",
                        help="also measure this other checkout of the repository, in the same rounds")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON summary here")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.server_rounds < 1:
        parser.error("--rounds and --server-rounds must be >= 1")
    if args.baseline is not None and not (args.baseline / "harness" / "cli.py").is_file():
        parser.error(f"--baseline {args.baseline}: not a checkout of this repository (no harness/cli.py)")
    quiet_logging(args.verbose)
    emit(run_benchmark(args.rounds, args.server_rounds, args.work,
                       args.baseline.resolve() if args.baseline else None), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
