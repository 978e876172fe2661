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
Beside today's detector, the detector as issue 35 left it, for real: its ``steps.py`` read from revision
``ISSUE35_REV`` (``git show``; it imports numpy only) and scored by today's scoring in the same run
(``--baseline-rev REV`` for another revision; ``harness/history/steps.py`` before the move, else
``harness/series/steps.py``).
Prints one JSON summary; ``--out FILE`` writes it too; its record is kept under ``benchmarks/results/``.

    .venv/bin/python benchmarks/bench_nightly_alerts.py [--per-cell 4] [--baseline-rev REV] [--out FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as `python benchmarks/x.py` from any directory
    sys.path.insert(0, str(REPO))

from _common import emit  # noqa: E402

from harness.series.steps import Rule, Tracker  # noqa: E402
from tests.series.anchors import Replay, hud_rule, otava_rule, sglang_rule  # noqa: E402
from tests.series.grid import grid  # noqa: E402
from tests.series.scoring import Online, score_history, summarise  # noqa: E402

RULE = Rule(0.02)
TUNE_SEED, REPORT_SEED = 1, 2
ISSUE35_REV = "4b19fa7"  # the last commit of issue 35 (HUD export, item 2b): the detector as it left it
_STEPS_PATHS = ("harness/series/steps.py", "harness/history/steps.py")  # after and before issue 44's move


def old_steps(rev: str, into: Path) -> ModuleType:
    """The detector module of revision ``rev`` of this repository, imported under its own name."""
    for path in _STEPS_PATHS:
        shown = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:{path}"], capture_output=True, timeout=60)
        if shown.returncode == 0:
            break
    else:
        raise SystemExit(f"--baseline-rev {rev}: none of {', '.join(_STEPS_PATHS)} at that revision")
    file = into / f"steps_{rev.replace('^', '_').replace('~', '_')}.py"
    file.write_bytes(shown.stdout)
    spec = importlib.util.spec_from_file_location(file.stem, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[file.stem] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def detectors(baselines: dict[str, ModuleType]) -> dict[str, Callable[[], Online]]:
    out: dict[str, Callable[[], Online]] = {"sglang-repro": lambda: Tracker(RULE)}
    for label, module in baselines.items():
        out[label] = lambda module=module: module.Tracker(module.Rule(RULE.min_effect))  # type: ignore[misc]
    return out | {
        "SGLang: 10% vs mean of last 10": lambda: Replay(sglang_rule),
        "HUD vLLM: median 3 vs 3, x0.8/x1.2": lambda: Replay(hud_rule),
        "Otava (re-implemented): E-Divisive w50, p<0.001": lambda: Replay(otava_rule),
    }


def run(seed: int, per_cell: int, quiet: int, only: str | None, baselines: dict[str, ModuleType]) -> dict[str, object]:
    histories = list(grid(seed, per_cell=per_cell, quiet_per_noise=quiet))
    out: dict[str, object] = {"seed_set": seed, "histories": len(histories)}
    for name, make in detectors(baselines).items():
        if only and not any(o in name for o in only.split(",")):
            continue
        t = time.monotonic()
        summary = summarise([score_history(h, make) for h in histories])
        summary["seconds"] = round(time.monotonic() - t, 1)
        out[name] = summary
        print(f"seed set {seed}: {name} done in {summary['seconds']} s", file=sys.stderr, flush=True)
    # The headline figures under names a quoted figure can spell (benchmarks/render_figures.py: no spaces, no dots).
    out["figures"] = {re.sub(r"[^\w-]+", "_", name): {
        "false_alarms": v["false_alarms"], "false_alarms_per_1000": v["false_alarms_per_1000_series_nights"],
        "recall_5_strong": v["recall_within_5_steps_ge_2.5x_noise"],
        "recall_10_mid": v["recall_within_10_steps_1.6x_to_2.5x_noise"],
        "drifts_named_drift": v["drift_final_names"].get("drift", 0), "drifts_named_step": v["drift_named_as_step"]}
        for name, v in out.items() if isinstance(v, dict)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-cell", type=int, default=4, help="step histories per (effect, noise, direction)")
    ap.add_argument("--quiet", type=int, default=4, help="histories per quiet kind and noise level")
    ap.add_argument("--only", help="run only the detectors whose name contains this (or one of these, comma-separated)")
    ap.add_argument("--seed-sets", default=f"{TUNE_SEED},{REPORT_SEED}", help="comma-separated seed sets")
    ap.add_argument("--baseline-rev", action="append", default=None,
                    help=f"score this revision's detector too (repeatable; default {ISSUE35_REV}, as issue 35 left it)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    seeds = [int(s) for s in args.seed_sets.split(",")]
    revs = args.baseline_rev or [ISSUE35_REV]
    with tempfile.TemporaryDirectory(prefix="bench-nightly-") as tmp:
        baselines = {(f"sglang-repro as issue 35 left it ({rev})" if rev == ISSUE35_REV else f"sglang-repro at {rev}"):
                     old_steps(rev, Path(tmp)) for rev in revs}
        summary = {
            "benchmark": "nightly_alerts", "server": "none: synthetic histories (tests.series.grid)",
            "min_effect": RULE.min_effect, "tune_seed_set": TUNE_SEED, "report_seed_set": REPORT_SEED,
            "baseline_revs": revs,
            "seed_sets": [run(s, args.per_cell, args.quiet, args.only, baselines) for s in seeds],
        }
    emit(summary, args.out)  # stdout, --out, and its record under benchmarks/results/


if __name__ == "__main__":
    main()
