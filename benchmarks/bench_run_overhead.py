"""What the harness adds to a run beyond the server's own start and the workload, and what shared servers save.

Part 1 (overhead): `--runs` runs of one case on the CPU reference server (`sim:post-fix`, `tokens=276,
path=graph`), each on a fresh server (no pool). Every run record carries per-phase timings (resolve,
preflight, start, workload, teardown, record); the harness's overhead is the run's duration less its
server start (start to ready) and its workload. Beside it, in the same run: a bare `python -c "import torch"`,
the floor of any cold process that loads the model.

Part 2 (shared servers): `compare --trials 5` on one graph-path case, with `server.share_between_trials`
on and off, wall time and server starts of each.

The reference server is a model of SGLang's mechanism (CPU), not SGLang.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from _common import REPO, SERVER_LABEL, emit, quiet_logging

from harness.pipeline import RunOptions, execute_run
from harness.scenario import load_file, select_cases

LONG = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"
CASE = "tokens=276,path=graph"


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 4)


def _bare_import_torch(n: int) -> float:
    walls = []
    for _ in range(n):
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", "import torch"], check=True)
        walls.append(time.monotonic() - t0)
    return _median(walls)


def overhead(runs: int, work: Path) -> dict[str, Any]:
    (case,) = select_cases(load_file(LONG), CASE)
    phases: dict[str, list[float]] = {}
    over, totals = [], []
    for i in range(runs):
        record = execute_run(case, "sim:post-fix", trial=i, options=RunOptions(out_root=work, progress=False))
        assert record.outcome.value == "pass", record.reason
        for name, value in record.timings.items():
            phases.setdefault(name, []).append(value)
        totals.append(record.duration_s)
        over.append(record.duration_s - record.timings.get("start", 0.0) - record.timings.get("workload", 0.0))
    return {"runs": runs, "run_s_p50": _median(totals), "phases_s_p50": {k: _median(v) for k, v in phases.items()},
            "harness_overhead_s_p50": _median(over), "bare_import_torch_s_p50": _bare_import_torch(max(3, runs // 2))}


def shared_vs_fresh(trials: int, work: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    data = yaml.safe_load(LONG.read_text())
    for share in (True, False):
        data["server"]["share_between_trials"] = share
        path = work / f"share-{share}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        t0 = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "harness", "compare", str(path), "--reference", "--case", CASE,
                               "--trials", str(trials), "--out", str(work / f"out-{share}")],
                              cwd=REPO, capture_output=True, text=True)
        wall = time.monotonic() - t0
        servers = list((work / f"out-{share}").glob("compare/*/servers/*"))
        runs = list((work / f"out-{share}").glob("compare/*/runs/*"))
        out["shared" if share else "fresh"] = {"exit": done.returncode, "wall_s": round(wall, 2),
                                               "runs": len(runs), "pooled_servers": len(servers)}
    out["fresh_over_shared"] = round(out["fresh"]["wall_s"] / out["shared"]["wall_s"], 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    quiet_logging(args.verbose)
    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        work = Path(tmp)
        result = {"server": SERVER_LABEL, "case": CASE, "overhead": overhead(args.runs, work / "runs"),
                  "trials": shared_vs_fresh(args.trials, work)}
    emit(result, args.out)


if __name__ == "__main__":
    main()
