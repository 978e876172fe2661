"""Nightly alerts on the grid histories (tests.series.grid): this project's detector beside the anchors.

Every detector runs online (each night sees only the past) and is charged for every alert a
person would get: steps, drift, and repeats of either (tests.series.scoring). Two seed sets:
``--tune`` (the one the detector's constants were chosen on) and ``--report`` (never looked at
while tuning). The anchors:

- SGLang's rule: the newest point more than 10% from the mean of the 10 before it;
- the PyTorch HUD's vLLM rule: the median of the last 3 points against the 3 before, x0.8 / x1.2;
- Otava's defaults, re-implemented (``apache-otava`` is not installable here): E-Divisive means
  over the last 50 points, a split kept when Welch's t-test gives p < 0.001, recursively.

The minimum effect is 2% (acceptance length's; a 5% rule could never see the grid's 3% steps).
Prints one JSON summary; ``--out FILE`` writes it too.

    .venv/bin/python benchmarks/bench_nightly_alerts.py [--per-cell 4] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as `python benchmarks/x.py` from any directory
    sys.path.insert(0, str(REPO))

from harness.series.steps import Rule, Tracker  # noqa: E402
from tests.series.anchors import Replay, hud_rule, otava_rule, sglang_rule  # noqa: E402
from tests.series.grid import grid  # noqa: E402
from tests.series.scoring import Online, score_history, summarise  # noqa: E402

RULE = Rule(0.02)
TUNE_SEED, REPORT_SEED = 1, 2


class Issue35(Tracker):
    """The detector as issue 35 left it, scored beside the current one in the same run: a level change within
    2 noise units, undecided after 20 nights, and a second change the same way raised as a second alert."""

    level_margin = 2.0
    level_window = 20

    def _moves_on(self, c: int, z: float) -> bool:
        return False


def detectors() -> dict[str, Callable[[], Online]]:
    return {
        "sglang-repro": lambda: Tracker(RULE),
        "sglang-repro as issue 35 left it": lambda: Issue35(RULE),
        "SGLang: 10% vs mean of last 10": lambda: Replay(sglang_rule),
        "HUD vLLM: median 3 vs 3, x0.8/x1.2": lambda: Replay(hud_rule),
        "Otava (re-implemented): E-Divisive w50, p<0.001": lambda: Replay(otava_rule),
    }


def run(seed: int, per_cell: int, quiet: int, only: str | None) -> dict[str, object]:
    histories = list(grid(seed, per_cell=per_cell, quiet_per_noise=quiet))
    out: dict[str, object] = {"seed_set": seed, "histories": len(histories)}
    for name, make in detectors().items():
        if only and not any(o in name for o in only.split(",")):
            continue
        t = time.monotonic()
        summary = summarise([score_history(h, make) for h in histories])
        summary["seconds"] = round(time.monotonic() - t, 1)
        out[name] = summary
        print(f"seed set {seed}: {name} done in {summary['seconds']} s", file=sys.stderr, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-cell", type=int, default=4, help="step histories per (effect, noise, direction)")
    ap.add_argument("--quiet", type=int, default=4, help="histories per quiet kind and noise level")
    ap.add_argument("--only", help="run only the detectors whose name contains this (or one of these, comma-separated)")
    ap.add_argument("--seed-sets", default=f"{TUNE_SEED},{REPORT_SEED}", help="comma-separated seed sets")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    seeds = [int(s) for s in args.seed_sets.split(",")]
    summary = {
        "benchmark": "nightly_alerts", "server": "none: synthetic histories (tests.series.grid)",
        "min_effect": RULE.min_effect, "tune_seed_set": TUNE_SEED, "report_seed_set": REPORT_SEED,
        "seed_sets": [run(s, args.per_cell, args.quiet, args.only) for s in seeds],
    }
    text = json.dumps(summary, indent=1)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
