"""The nightly "Done when": eleven nightly runs of the accept-length guard on the reference server.

Nights 1-6 run ``sim:post-fix``, nights 7-11 ``sim:post-fix,step-cost-ms=20`` (a real slowdown); the
incident is due on night 10, the fourth slow night, and night 11 must not raise it again.
Prints each night's exit code and its alerts, then builds the dashboard from the store.

    .venv/bin/python benchmarks/nightly_guard.py --store /tmp/guard.db --out /tmp/guard [--trials 5] [--case ...]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

SCENARIO = "scenarios/frozen_kv_mtp/accept_length_guard.yaml"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--trials", default="5")
    ap.add_argument("--case", default=None)
    args = ap.parse_args()
    codes = []
    for night in range(1, 12):
        build = "sim:post-fix" if night <= 6 else "sim:post-fix,step-cost-ms=20"
        argv = [sys.executable, "-m", "harness", "nightly", SCENARIO, "--build", build, "--store", args.store,
                "--label", f"night-{night:02d}", "--trials", args.trials, "--out", str(args.out), "--no-progress"]
        if args.case:
            argv += ["--case", args.case]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
        codes.append(proc.returncode)
        print(f"--- night {night} ({build}): exit {proc.returncode}\n{proc.stdout.strip()}", flush=True)
        if proc.returncode not in (0, 1):
            print(proc.stderr[-2000:], flush=True)
    dash = subprocess.run([sys.executable, "-m", "harness", "dashboard", "--store", args.store,
                           "-o", str(args.out / "dashboard")], capture_output=True, text=True, timeout=600)
    print(dash.stdout.strip(), dash.stderr.strip())
    print("exit codes:", codes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
