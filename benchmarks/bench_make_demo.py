"""How long does a newcomer's `make demo` take from a fresh clone, and does it reach the real crash -> pass?

Each round clones the repository (the committed HEAD, or ``--rev``) into a new folder and runs ``make demo`` there
with a new ``.venv`` (so the install counts). ``--cold``: a new, empty ``SGLANG_REPRO_CACHE`` (the real-SGLang CPU
environments, the release wheels and the tiny models are made, as on a new machine) and a new, empty
``UV_CACHE_DIR`` (uv downloads everything it installs). pip's own HTTP cache is the user's, as it is: warm on a
machine that has installed these packages before (the record says so). ``--baseline REV`` runs that revision in the
same rounds, alternating, so both see the same load; the summary gives the candidate's wall time over the baseline's.

Prints one JSON summary: per round the wall time of the whole command, its exit code, whether the output reached the
real-SGLang line ``crash -> pass`` (and when), the load average at the start and end, and the machine's CPU over the
round from ``/proc/stat`` (every process on the machine, other users' too). The record is ``bench_make_demo`` with
``--cold``, ``bench_make_demo_warm`` without.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

from _common import alternate_rounds, emit, revision_parser
from bench_make_test import cpu_over, machine_cpu_s

REPO = Path(__file__).resolve().parent.parent
# The demo's last comparison, on real SGLang: its case line once the comparison ends.
_REAL_LINE = re.compile(r"^tokens=276,path=eager\s+crash -> pass\b.*$", re.MULTILINE)
GOAL_S = 300


def _clone(rev: str, into: Path) -> Path:
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(into)], check=True)
    subprocess.run(["git", "-C", str(into), "checkout", "-q", rev], check=True)
    return into


def _stamp_lines(stream: IO[bytes], log: Path, began: float) -> None:
    # Each line with its second since the start: when the first report and the real comparison came.
    with log.open("w", encoding="utf-8") as out:
        for raw in iter(stream.readline, b""):
            out.write(f"[{time.monotonic() - began:7.1f}] {raw.decode(errors='replace')}")
            out.flush()


def _round(rev: str, work: Path, name: str, cold: bool, timeout_s: float) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=work))
    clone = _clone(rev, folder / "clone")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "VIRTUAL_ENV"))}
    if cold:
        env["SGLANG_REPRO_CACHE"] = str(folder / "cache")
        env["UV_CACHE_DIR"] = str(folder / "uv-cache")
    log = folder / "make-demo.log"
    load_before = os.getloadavg()
    cpu_before = machine_cpu_s()
    began = time.monotonic()
    proc = subprocess.Popen(["make", "demo"], cwd=clone, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    assert proc.stdout is not None
    reader = threading.Thread(target=_stamp_lines, args=(proc.stdout, log, began), daemon=True)
    reader.start()
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        code = proc.wait()
    wall = time.monotonic() - began
    reader.join(timeout=10)
    text = log.read_text(errors="replace")
    real = [line for line in text.splitlines() if _REAL_LINE.search(line.split("] ", 1)[-1])]
    first_report = next((line for line in text.splitlines() if "report:" in line), None)

    def _at(line: str | None) -> float | None:
        return float(line[1:line.index("]")]) if line else None

    return {"rev": rev, "exit_code": code, "wall_s": round(wall, 1), "real_crash_to_pass": bool(real),
            "real_line_at_s": _at(real[-1] if real else None), "first_report_at_s": _at(first_report),
            "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()],
            "machine_cpu": cpu_over(cpu_before, machine_cpu_s(), os.cpu_count() or 1), "log": str(log)}


def main() -> int:
    parser = revision_parser(__doc__, work=REPO / "reports" / "benchmarks" / "make_demo", timeout_s=1200,
                             cold_help="empty environment and uv caches, as on a new machine")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    rounds = alternate_rounds(args.rev, args.baseline, args.rounds,
                              lambda name, rev: _round(rev, args.work, name, args.cold, args.timeout_s))
    summary: dict[str, Any] = {
        "question": "wall time of `make demo` in a fresh clone, and whether it shows the real crash -> pass",
        "cold": args.cold, "pip_http_cache": "the user's (warm here)", "cores": os.cpu_count(), "goal_s": GOAL_S,
        **{name: {"rounds": results, "wall_s_max": max(r["wall_s"] for r in results),
                  "real_crash_to_pass": all(r["real_crash_to_pass"] and r["exit_code"] == 0 for r in results)}
           for name, results in rounds.items()},
    }
    if args.baseline:
        summary["wall_ratio_candidate_over_baseline"] = round(
            summary["candidate"]["wall_s_max"] / max(summary["baseline"]["wall_s_max"], 1e-9), 3)
    # Cold and warm are two questions with their own newest record (the README quotes both).
    emit(summary, args.out, benchmark="bench_make_demo" if args.cold else "bench_make_demo_warm")
    return 0


if __name__ == "__main__":
    sys.exit(main())
