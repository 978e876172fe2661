"""Large changes on young series: how many nights until the first alert, and what the rule costs.

Young histories (``tests.series.grid.young_grid``): 3, 5 or 10 nights of history, then a large change
(-30%, -50%, -80%, and as much up) held for 10 nights, under 1-8% noise (Gaussian, Student t(3),
bimodal), 1-5 trials a night; and as many young histories with no change. Every detector runs online
(each night sees only the past) with the throughput rule (5% minimum effect) and is charged for every
alert a person would get. Beside this project's detector: SGLang's rule over the nights there are
(the newest point more than 10% from the mean of up to 10 before it) and the PyTorch HUD's vLLM rule
(median of the last 3 against the 3 before, x0.8 / x1.2). The delay of a change is the night of its
first alert less its first changed night: 0 is the first slow night, 1 the second.

What the large-change rule costs on the grid (``tests.series.grid``, the histories
``bench_nightly_alerts.py`` scores): the same detector with and without it, false alarms and recall.
Two seed sets: ``--tune`` 1 (the rule's constants were chosen on it) and ``--report`` 2.

    .venv/bin/python benchmarks/bench_young_series.py [--per-cell 2] [--no-grid] [--out FILE]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as `python benchmarks/x.py` from any directory
    sys.path.insert(0, str(REPO))

from _common import emit  # noqa: E402

from harness.series.steps import Finding, Rule, Tracker  # noqa: E402
from tests.series.anchors import Replay, hud_rule, sglang_rule_young  # noqa: E402
from tests.series.grid import YOUNG_BEFORE, GridHistory, grid, young_grid  # noqa: E402
from tests.series.scoring import TOLERANCE, Online, score_history, summarise  # noqa: E402

RULE = Rule(0.05)
TUNE_SEED, REPORT_SEED = 1, 2


class WithoutLarge(Tracker):
    """The detector without its large-change rule: what the grid's figures were before it."""

    def _large(self) -> Finding | None:
        return None


def detectors() -> dict[str, Callable[[], Online]]:
    """By key: sglang_repro (this project's), sglang_rule (10% vs the mean of up to 10 before), hud_rule (median
    of 3 vs 3, x0.8 / x1.2)."""
    return {
        "sglang_repro": lambda: Tracker(RULE),
        "sglang_rule": lambda: Replay(sglang_rule_young),
        "hud_rule": lambda: Replay(hud_rule),
    }


def _alerts(history: GridHistory, make: Callable[[], Online]) -> list[tuple[int, int]]:
    """(night raised, night named) of every alert, a change re-reported within TOLERANCE points counted once."""
    det = make()
    nights: list[int] = []
    raised: list[tuple[int, int]] = []
    for night, trials in enumerate(history.trials):
        if not trials:
            continue
        nights.append(night)
        for kind, idx in det.push(float(np.median(trials)), trials):
            if kind.startswith("renamed:"):
                continue  # a rename is a message too, but no young history here lives long enough for one
            named = nights[idx]
            if not any(abs(named - n) <= TOLERANCE for _, n in raised):
                raised.append((night, named))
    return raised


def _score(histories: Sequence[GridHistory], make: Callable[[], Online]) -> dict[str, object]:
    out: dict[str, object] = {}
    for before in YOUNG_BEFORE:
        steps = [h for h in histories if h.kind == "young-step" and h.change == before]
        flats = [h for h in histories if h.kind == "young-flat" and h.nights == before + 10]
        delays: list[int] = []
        false = 0
        for h in steps:
            alerts = _alerts(h, make)
            hit = next((night - before for night, named in alerts if abs(named - before) <= TOLERANCE
                        and night >= before), None)
            if hit is not None:
                delays.append(hit)
            false += len(alerts) - (hit is not None)
        quiet = sum(len(_alerts(h, make)) for h in flats)
        found = len(delays)
        out[f"nights_{before}"] = {
            "large_changes": len(steps), "found_within_10": found,
            "median_delay_nights": float(np.median(delays)) if delays else None,
            "by_the_second_night": sum(d <= 1 for d in delays), "on_the_first_night": sum(d == 0 for d in delays),
            "delay_counts": {f"d{d}": delays.count(d) for d in sorted(set(delays))},
            "false_alarms_on_the_step_histories": false,
            "quiet_histories": len(flats), "false_alarms_on_quiet_histories": quiet,
            "false_alarms": false + quiet,
            "false_alarms_per_1000_series_nights": round(1000 * (false + quiet) / sum(
                h.nights for h in [*steps, *flats]), 2),
        }
    return out


def _cost(seed: int, per_cell: int) -> dict[str, object]:
    histories = list(grid(seed, per_cell=per_cell))
    out: dict[str, object] = {"histories": len(histories)}
    for name, make in (("with_large", lambda: Tracker(Rule(0.02))), ("without_large", lambda: WithoutLarge(Rule(0.02)))):
        t = time.monotonic()
        s = summarise([score_history(h, make) for h in histories])
        keep = ("false_alarms_per_1000_series_nights", "false_alarms", "false_alarms_by_kind",
                "recall_within_5_steps_ge_2.5x_noise", "recall_within_10_steps_1.6x_to_2.5x_noise",
                "median_delay_nights", "drift_named_as_step", "drift_named_once_score_of_found")
        out[name] = {k: s[k] for k in keep} | {"seconds": round(time.monotonic() - t, 1)}
        print(f"grid seed set {seed}: {name} done", file=sys.stderr, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-cell", type=int, default=2, help="young histories per (nights, noise, effect, direction)")
    ap.add_argument("--seed-sets", default=f"{TUNE_SEED},{REPORT_SEED}", help="comma-separated seed sets")
    ap.add_argument("--no-grid", action="store_true", help="leave out the rule's cost on the grid (minutes)")
    ap.add_argument("--grid-per-cell", type=int, default=4, help="step histories per grid cell")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    seeds = [int(s) for s in args.seed_sets.split(",")]
    started = time.monotonic()
    summary: dict[str, object] = {"benchmark": "young_series",
                                  "server": "none: synthetic histories (tests.series.grid.young_grid)",
                                  "min_effect": RULE.min_effect, "tune_seed_set": TUNE_SEED, "report_seed_set": REPORT_SEED}
    for seed in seeds:
        histories = list(young_grid(seed, per_cell=args.per_cell))
        one: dict[str, object] = {"seed_set": seed, "young_histories": len(histories)}
        for name, make in detectors().items():
            one[name] = _score(histories, make)
        if not args.no_grid:  # the grid's own minimum effect, 2%: its figures are bench_nightly_alerts.py's
            one["grid_cost"] = _cost(seed, args.grid_per_cell)
        role = {TUNE_SEED: "tune", REPORT_SEED: "report"}.get(seed, f"seed_{seed}")
        summary[role] = one
    summary["seconds"] = round(time.monotonic() - started, 1)
    emit(summary, args.out)  # stdout, --out, and its record under benchmarks/results/


if __name__ == "__main__":
    main()
