"""The suite under load: chosen test files run N times beside a CPU burner on every core; failures counted.

Issue 31 found three failures that showed only on a loaded machine (a second signal in a window between
shields, a client that fell behind blanking a stateful comparison). This runs the given test files (default:
the ones those failures came from) with ``pytest -p no:xdist`` while one busy-looping process per core
keeps the machine saturated, ``--rounds`` times, and prints JSON: per round the exit code, the failed test ids
and the wall time, and the total of failures. It proves nothing about a machine it did not run on; the figure
to quote is ``failures`` over ``rounds`` on a named machine.

    python benchmarks/bench_under_load.py --rounds 3 [--burners N] [--out FILE] [TEST ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as `python benchmarks/x.py` from any directory
    sys.path.insert(0, str(REPO))

from harness.util.kill import end_child, end_group  # noqa: E402

DEFAULT_TESTS = (
    "tests/test_interrupt_double.py::test_a_second_signal_during_teardown_loses_no_record",
    "tests/sim/test_sim_stateful.py",
    "tests/test_interrupt_ending.py",
)
# One core's worth of work, forever, at the lowest priority the burner can ask for: the tests compete with it
# for the CPU as they would with other work on a shared machine.
_BURN = "import os\nos.nice(5)\nwhile True:\n    pass\n"
_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.M)


def start_burners(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", _BURN], stdin=subprocess.DEVNULL, start_new_session=True)
            for _ in range(n)]


def round_argv(tests: list[str], suite: bool) -> list[str]:
    if suite:
        return ["make", "--no-print-directory", "test"]
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "-rfE", *tests]


def one_round(argv: list[str], timeout_s: float, log: Path | None = None) -> dict[str, Any]:
    began = time.monotonic()
    # Its own session, so a round past its bound is ended with every worker and server it started.
    proc = subprocess.Popen(argv, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout_s)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        end_group(proc.pid, grace_s=10.0)
        output, _ = proc.communicate()
        code = -int(signal.SIGKILL)
    if log is not None:
        log.write_text(output)
    failed = sorted(set(_FAILED.findall(output)))
    last = (output.strip().splitlines() or [""])[-1]
    return {"exit_code": code, "failed": failed, "summary": last, "wall_s": round(time.monotonic() - began, 1)}


def _log(out: Path | None, n: int) -> Path | None:
    return None if out is None else out.with_name(f"{out.stem}.round{n}.log")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tests", nargs="*", default=list(DEFAULT_TESTS), help="pytest ids (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--burners", type=int, default=os.cpu_count() or 1, help="busy processes (default: cores)")
    parser.add_argument("--timeout-s", type=float, default=1800.0, help="bound on one round")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument("--suite", action="store_true", help="each round is the whole `make test` (tests ignored)")
    args = parser.parse_args(argv)
    command = round_argv(args.tests, args.suite)
    burners = start_burners(args.burners)
    try:
        rounds = [one_round(command, args.timeout_s, _log(args.out, n)) for n in range(1, args.rounds + 1)]
    finally:
        for proc in burners:
            end_child(proc, grace_s=2.0)
    result = {
        "benchmark": "under_load", "tests": ["make test"] if args.suite else args.tests,
        "burners": args.burners, "cores": os.cpu_count(),
        # so a caller can check that these, and not some other process that loops, are gone
        "burner_pids": [proc.pid for proc in burners],
        "rounds": rounds, "failures": sum(len(r["failed"]) or int(r["exit_code"] != 0) for r in rounds),
        "rounds_clean": sum(1 for r in rounds if r["exit_code"] == 0),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0 if result["failures"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
