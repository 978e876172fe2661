"""Nightly alerts on held-out sets in the shape of issue 47's report (``tests.series.heldout``).

Sets of 60 histories of 60 nights: ``points`` (12 steps of 2.5-4x the noise, 12 noisy steps of 1.7-2x, 24
stationary series of high noise in seven shapes, 12 drifts) and ``trials`` (the raw trials, 3-5 a night: 12
steps of three trial sd, 12 steps right after a gap of 2-3 nights, 24 stationary, 12 drifts).
Scored online, every alert a person would get counted (``tests.series.scoring``). The goals: steps within 5
nights >= 11 of 12, false alarms <= 2 per set of 24 stationary series, every drift named once as drift, no
step alert raised on a drift. The detector's constants may be chosen looking at the ``--tune`` seed sets
only; the ``--report`` ones are read once it is done.

    .venv/bin/python benchmarks/bench_heldout_alerts.py [--seeds tune|report|all] [--out FILE]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as `python benchmarks/x.py` from any directory
    sys.path.insert(0, str(REPO))

from _common import emit  # noqa: E402

from harness.series.steps import LARGE_CHANGE, Rule, Tracker  # noqa: E402
from tests.series.heldout import REPORT, TUNE, heldout  # noqa: E402
from tests.series.scoring import Online, Outcome, score_history  # noqa: E402

RULE = Rule(0.02)
STEP_NAMES = ("step", LARGE_CHANGE)


def _within(o: Outcome, nights: int) -> bool:
    return o.hit is not None and o.hit[0] <= nights


def score_set(outs: Sequence[Outcome]) -> dict[str, object]:
    """One set's figures (keys a quoted figure can name: ``benchmarks/render_figures.py``)."""
    by: dict[str, list[Outcome]] = {}
    for o in outs:
        by.setdefault(o.history.kind, []).append(o)
    drifts = by.get("drift", [])
    stationary = by.get("stationary", [])
    out: dict[str, object] = {}
    for kind, nights in (("step", 5), ("trial-step", 5), ("gap-step", 5), ("noisy-step", 10)):
        if kind in by:
            key = kind.replace("-", "_")
            out[f"{key}s"] = len(by[kind])
            out[f"{key}s_within_{nights}"] = sum(_within(o, nights) for o in by[kind])
    out["stationary"] = len(stationary)
    out["stationary_false_alarms"] = sum(len(o.alerts) for o in stationary)
    out["false_alarms_elsewhere"] = sum(o.false_alarms + o.repeats for o in outs if o.history.kind != "stationary")
    out["drifts"] = len(drifts)
    out["drifts_named_once"] = sum(o.hit_name == "drift" and o.repeats == 0 and len(o.alerts) == 1 for o in drifts)
    out["step_alerts_on_drifts"] = sum(1 for o in drifts for j, (_, kind, _) in enumerate(o.alerts)
                                       if kind in STEP_NAMES or o.names[j] in STEP_NAMES)
    out["stationary_false_alarms_by_shape"] = {
        f: n for f in sorted({o.history.family for o in stationary})
        if (n := sum(len(o.alerts) for o in stationary if o.history.family == f))}
    return out


def _total(sets: Sequence[dict[str, object]]) -> dict[str, object]:
    """The sets' figures summed (the worst set's stationary false alarms beside them)."""
    keys = [k for k, v in sets[0].items() if isinstance(v, int)]
    out: dict[str, object] = {k: sum(int(str(s[k])) for s in sets) for k in keys}
    out["stationary_false_alarms_worst_set"] = max(int(str(s["stationary_false_alarms"])) for s in sets)
    return out


def run(seeds: Sequence[int], make: Callable[[], Online]) -> dict[str, object]:
    """Per kind of set (points, trials): every seed's figures and their total."""
    out: dict[str, object] = {}
    for kind in ("points", "trials"):
        per = {str(seed): score_set([score_history(h, make) for h in heldout(seed, kind)]) for seed in seeds}
        out[kind] = {"total": _total(list(per.values())), "seeds": per}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", choices=("tune", "report", "all"), default="all")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    every = {"tune": TUNE, "report": REPORT}
    roles = every if args.seeds == "all" else {args.seeds: every[args.seeds]}
    started = time.monotonic()
    summary: dict[str, object] = {"benchmark": "heldout_alerts", "server": "none: synthetic histories (tests.series.heldout)",
                                  "min_effect": RULE.min_effect, "tune_seeds": TUNE, "report_seeds": REPORT}
    for role, seeds in roles.items():
        summary[role] = run(seeds, lambda: Tracker(RULE))
    summary["seconds"] = round(time.monotonic() - started, 1)
    emit(summary, args.out)  # stdout, --out, and its record under benchmarks/results/


if __name__ == "__main__":
    main()
