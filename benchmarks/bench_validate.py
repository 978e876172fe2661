"""How long does `sglang-repro validate` take over many scenario files, beside another checkout's?

Copies the seed scenarios (``scenarios/**/*.yaml``) into a folder until it holds ``--files`` of them,
then times ``python -m harness validate FOLDER`` (a whole process, as a user runs it) and the bare
interpreter start, in alternating rounds; ``--baseline CHECKOUT`` times that checkout's harness on the
same folder in the same rounds. Prints one JSON summary.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import emit

REPO = Path(__file__).resolve().parent.parent


def _corpus(folder: Path, files: int) -> int:
    seeds = sorted((REPO / "scenarios").rglob("*.yaml"))
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        seed = seeds[i % len(seeds)]
        # Each copy is its own scenario (names must be unique across a folder), line for line the seed.
        text = re.sub(r"^name: (\S+)", rf"name: \g<1>-{i:04d}", seed.read_text(), count=1, flags=re.MULTILINE)
        (folder / f"s{i:04d}-{seed.name}").write_text(text)
    return len(seeds)


def _time(argv: list[str], cwd: Path) -> tuple[float, int]:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    began = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=False)
    return time.perf_counter() - began, done.returncode


def _stats(samples: list[float]) -> dict[str, Any]:
    return {"n": len(samples), "median_s": round(statistics.median(samples), 4), "min_s": round(min(samples), 4)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout, timed in the same rounds")
    parser.add_argument("--work", type=Path, default=REPO / "reports" / "benchmarks" / "validate")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    folder = args.work / "corpus"
    shutil.rmtree(folder, ignore_errors=True)
    seeds = _corpus(folder, args.files)
    arms = {"candidate": REPO, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    times: dict[str, list[float]] = {"interpreter": [], **{name: [] for name in arms}}
    codes: dict[str, set[int]] = {name: set() for name in arms}
    for _ in range(args.rounds):
        times["interpreter"].append(_time([sys.executable, "-c", "pass"], REPO)[0])
        for name, checkout in arms.items():
            took, code = _time([sys.executable, "-m", "harness", "validate", str(folder)], checkout)
            times[name].append(took)
            codes[name].add(code)
    summary: dict[str, Any] = {
        "question": f"wall time of `validate` over {args.files} scenario files (copies of {seeds} seeds); "
                    "interpreter: `python -c pass`, the floor",
        "files": args.files,
        "load_1m": round(os.getloadavg()[0], 2), "goal_s": 0.8,
        **{name: _stats(samples) for name, samples in times.items()},
        "exit_codes": {name: sorted(c) for name, c in codes.items()},
    }
    if "baseline" in arms:
        summary["speedup"] = round(summary["baseline"]["median_s"] / summary["candidate"]["median_s"], 2)
    emit(summary, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
