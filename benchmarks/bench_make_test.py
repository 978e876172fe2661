"""How long does a newcomer's first `make test` take, from a fresh clone, and is it green?

Each round clones the repository (the committed HEAD, or ``--rev``) into a new folder and runs
``make test`` there with a new ``.venv`` (so the install counts) and, with ``--cold``, a new
``SGLANG_REPRO_CACHE`` (so the two real sglang environments are created too, as on a new machine).
``--baseline REV`` runs that revision in the same rounds, alternating, so both see the same load.
``--beside`` runs a second `make test` of the same revision at the same time in another clone: the
"machine loaded by another make test" condition of the flaky-test goal.

Prints one JSON summary (rounds, wall time of the whole command, pytest's own time, its closing line,
the load average at the start and end of each round, and the machine's CPU over the round from
``/proc/stat``: busy CPU-seconds of every process on it, the share of the cores they kept busy, and the
floor they put under the wall time, busy seconds / cores, which no scheduling of the same work beats).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import alternate_rounds, emit, revision_parser

REPO = Path(__file__).resolve().parent.parent
_SUMMARY = re.compile(r"^=+ (.*(?:passed|failed|error).*) in ([0-9.]+)s", re.MULTILINE)


def _clone(rev: str, into: Path) -> Path:
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(into)], check=True)
    subprocess.run(["git", "-C", str(into), "checkout", "-q", rev], check=True)
    return into


def machine_cpu_s() -> tuple[float, float]:
    """The machine's busy and idle CPU-seconds since boot, all cores (``/proc/stat``'s first line)."""
    with open("/proc/stat") as stat:
        ticks = [int(x) for x in stat.readline().split()[1:9]]  # user nice system idle iowait irq softirq steal
    idle = ticks[3] + ticks[4]
    hz = os.sysconf("SC_CLK_TCK")
    return (sum(ticks) - idle) / hz, idle / hz


def cpu_over(before: tuple[float, float], after: tuple[float, float], cores: int) -> dict[str, float]:
    """What the machine's cores did between two :func:`machine_cpu_s` readings."""
    busy, idle = after[0] - before[0], after[1] - before[1]
    return {"busy_s": round(busy, 1), "busy_share": round(busy / max(busy + idle, 1e-9), 3),
            "floor_s": round(busy / cores, 1)}


def _start(clone: Path, cache: Path | None, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "VIRTUAL_ENV"))}
    if cache is not None:
        env["SGLANG_REPRO_CACHE"] = str(cache)
    with log.open("wb") as out:
        return subprocess.Popen(["make", "test"], cwd=clone, stdout=out, stderr=subprocess.STDOUT, env=env,
                                stdin=subprocess.DEVNULL, start_new_session=True)


def _result(proc: subprocess.Popen[bytes], began: float, log: Path, timeout_s: float) -> dict[str, Any]:
    try:
        code = proc.wait(timeout=max(1.0, began + timeout_s - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        code = proc.wait()
    wall = time.monotonic() - began
    text = log.read_text(errors="replace")
    found = _SUMMARY.findall(text)
    closing, pytest_s = (found[-1][0], float(found[-1][1])) if found else (None, None)
    return {"exit_code": code, "wall_s": round(wall, 1), "pytest_s": pytest_s,
            "setup_and_rest_s": round(wall - pytest_s, 1) if pytest_s is not None else None,
            "closing_line": closing, "green": code == 0, "log": str(log)}


def _round(rev: str, work: Path, name: str, cold: bool, beside: bool, timeout_s: float) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=work))
    clone = _clone(rev, folder / "clone")
    cache = folder / "cache" if cold else None
    load_before = os.getloadavg()[0]
    cpu_before = machine_cpu_s()
    began = time.monotonic()
    proc = _start(clone, cache, folder / "make-test.log")
    neighbour = None
    if beside:  # the same command in another clone, started at the same time, as a second newcomer would
        other = _clone(rev, folder / "beside")
        neighbour = _start(other, folder / "cache-beside" if cold else None, folder / "beside.log")
    result = _result(proc, began, folder / "make-test.log", timeout_s)
    if neighbour is not None:
        result["beside"] = _result(neighbour, began, folder / "beside.log", timeout_s)
    # Every process on the machine counts, the second make test's too: with --beside the floor is the pair's.
    result.update(rev=rev, load_before=round(load_before, 2), load_after=round(os.getloadavg()[0], 2),
                  machine_cpu=cpu_over(cpu_before, machine_cpu_s(), os.cpu_count() or 1))
    return result


def main() -> int:
    parser = revision_parser(__doc__, work=REPO / "reports" / "benchmarks" / "make_test", timeout_s=3600,
                             cold_help="fresh sglang environments too, as on a new machine")
    parser.add_argument("--beside", action="store_true", help="a second make test at the same time (load)")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    rounds = alternate_rounds(args.rev, args.baseline, args.rounds,
                              lambda name, rev: _round(rev, args.work, name, args.cold, args.beside, args.timeout_s))
    summary = {
        "question": "wall time and verdict of `make test` in a fresh clone",
        "cold": args.cold, "beside": args.beside, "cores": os.cpu_count(),
        "goal_s": 480,
        **{name: {"rounds": results, "green": sum(r["green"] for r in results),
                  "wall_s_max": max(r["wall_s"] for r in results)} for name, results in rounds.items()},
    }
    emit(summary, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
