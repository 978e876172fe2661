"""Oracle runs and wall time to the minimal case: `sglang-repro minimize` (cheap-first order, known runs reused)
beside plain textbook ddmin over the same atoms (the scenario's order, the full workload during the flag
search, bisection for lengths, nothing reused), on the #28264 scenario's eager case at `sim:pre-fix`.

Both arms use the same oracle (same failure: outcome, signature, phase, frames), the same repetition rule,
the same 3-of-3 confirmation, one candidate at a time (`--jobs 1`), and no results store (only a session's
own runs are known). The arms alternate when `--rounds` > 1. Server runs count every reference-server start, the baseline and the
confirmation included.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import REPO, SERVER_LABEL, emit, quiet_logging, ratio

from harness.build import resolve_build
from harness.minimize import MinimizeOptions, minimize
from harness.scenario import load_file, select_cases

SCENARIO = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"
CASE = "tokens=276,path=eager"


def one(plain: bool, work: Path) -> dict[str, Any]:
    (case,) = select_cases(load_file(SCENARIO), CASE)
    t0 = time.monotonic()
    res = minimize(case, resolve_build("sim:pre-fix"), MinimizeOptions(plain=plain, out_root=work, jobs=1))
    wall = time.monotonic() - t0
    kept = sorted(a.label for a in res.minimal.atoms) if res.minimal else None
    return {
        "status": res.status,
        "server_runs": res.fresh_runs,
        "tries": len(res.attempts),
        "answered_by_cache": sum(1 for a in res.attempts if a.reused_from is not None),
        "wall_s": round(wall, 1),
        "minimal_flags": kept,
        "minimal_workload": res.minimal.shape.describe() if res.minimal else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="rounds of (minimize, plain ddmin)")
    parser.add_argument("--work", type=Path, default=None, help="where sessions go (default: a temp folder)")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON summary here")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    quiet_logging(args.verbose)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-minimize-"))
    arms: dict[str, list[dict[str, Any]]] = {"minimize": [], "plain_ddmin": []}
    for r in range(args.rounds):
        for name, plain in (("minimize", False), ("plain_ddmin", True)):
            arms[name].append(one(plain, work / f"{name}-{r}"))
            print(f"round {r} {name}: {arms[name][-1]}", file=sys.stderr, flush=True)

    def med(name: str, key: str) -> float:
        return float(statistics.median(x[key] for x in arms[name]))

    emit({
        "benchmark": "minimize",
        "server": SERVER_LABEL,
        "case": f"{SCENARIO.relative_to(REPO)}::{CASE} on sim:pre-fix",
        "rounds": args.rounds,
        "arms": arms,
        "median": {name: {"server_runs": med(name, "server_runs"), "wall_s": med(name, "wall_s")} for name in arms},
        "ratio_plain_over_minimize": {
            "server_runs": ratio(med("plain_ddmin", "server_runs"), med("minimize", "server_runs")),
            "wall_s": ratio(med("plain_ddmin", "wall_s"), med("minimize", "wall_s")),
        },
    }, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
