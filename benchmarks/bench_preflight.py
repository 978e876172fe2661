"""Pre-flight on a real sglang build, cold and cached, and the environment probe, cold and cached.

Usage: python benchmarks/bench_preflight.py [--rounds 3] [--spec 'pip:sglang==0.5.15,deps=none'] [--out FILE]

Each round points the build cache (`$SGLANG_REPRO_CACHE/builds`, see harness/build/cache.py) at a fresh
empty folder, then times, in this process:

* flag check, cold: `check_flags` on the flags of the case `tokens=276,path=graph` of
  scenarios/frozen_kv_mtp/long_prompt_stale_out_cache_loc.yaml, as one run does; the build's own
  parser process loads sglang (and torch) to parse them.
* flag check, cached: the same flags on another port, as the next run of the case does.
* a batch, cold: every case's flags (`check_flags_up_front`, as `compare` calls it), in a fresh cache.
* environment description (`describe_environment`, written to each run's env.json), cold and cached.

The build must already be prepared (`sglang-repro prepare SPEC`); the build's environment
itself lives in the real cache and is never rebuilt here.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import emit, quiet_logging, ratio, summary

from harness.build import describe_environment, parse_build_spec, pip_env_ready, resolve_build
from harness.build.cache import cache_file
from harness.launch.launcher import launcher_for
from harness.launch.preflight import check_flags
from harness.launch.preflight_batch import check_flags_up_front
from harness.scenario import load_file, select_cases, server_flags

__all__ = ["main", "run_benchmark"]

REPO = Path(__file__).resolve().parent.parent
SCENARIO = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"
CASE = "tokens=276,path=graph"
DEFAULT_SPEC = "pip:sglang==0.5.15,deps=none"


def _timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def _builds_cache(root: Path) -> None:
    # Only the build cache moves: cache_file() reads $SGLANG_REPRO_CACHE at call time, and the
    # build's environment was resolved before (from the real cache).
    os.environ["SGLANG_REPRO_CACHE"] = str(root)


def run_benchmark(spec: str, rounds: int) -> dict[str, Any]:
    parsed = parse_build_spec(spec)
    if parsed.kind == "pip" and not pip_env_ready(parsed):
        return {"spec": spec, "available": False, "why": f"{spec} is not prepared (sglang-repro prepare)"}
    build = resolve_build(parsed)
    loaded = load_file(SCENARIO)
    cases = loaded.cases
    case = select_cases(loaded, CASE)[0]
    times: dict[str, list[float]] = {k: [] for k in ("cold", "cached", "batch_cold", "batch_then_run",
                                                       "env_cold", "env_cached")}  # fmt: skip
    saved = os.environ.get("SGLANG_REPRO_CACHE")
    launcher = launcher_for(build)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-preflight-") as tmp:
            flags = [server_flags(case.scenario, port=port) for port in (31100, 31200)]  # a run, then the next
            for i in range(rounds):
                _builds_cache(Path(tmp) / f"single-{i}")
                times["cold"].append(_timed(lambda: check_flags(build, flags[0])))
                times["cached"].append(_timed(lambda: check_flags(build, flags[1])))
                assert cache_file(build).is_file()
                _builds_cache(Path(tmp) / f"batch-{i}")
                times["batch_cold"].append(_timed(lambda: check_flags_up_front(cases, [build])))
                # Each run asks in the build's words, as the batch did (0.5.15 rewrites the deprecated
                # --disable-cuda-graph): asked in the scenario's, every check would miss the batch's cache.
                times["batch_then_run"].append(_timed(lambda: [
                    check_flags(build, server_flags(launcher.case_for(c).scenario, port=31300)) for c in cases]))
                times["env_cold"].append(_timed(lambda: describe_environment(build)))
                times["env_cached"].append(_timed(lambda: describe_environment(build)))
    finally:
        if saved is None:
            os.environ.pop("SGLANG_REPRO_CACHE", None)
        else:
            os.environ["SGLANG_REPRO_CACHE"] = saved
    s = {k: summary(v) for k, v in times.items()}
    return {
        "spec": spec,
        "available": True,
        "sglang": build.version,
        "case": CASE,
        "cases_in_batch": len(cases),
        "machine": {"cpus": os.cpu_count(), "loadavg_at_end": [round(x, 2) for x in os.getloadavg()]},
        "flag_check_ms": {"cold": s["cold"], "cached": s["cached"]},
        "batch_ms": {"cold_all_cases": s["batch_cold"], "then_every_case_run": s["batch_then_run"]},
        "environment_ms": {"cold": s["env_cold"], "cached": s["env_cached"]},
        "ratio_cold_over_cached_p50": {"flag_check": ratio(s["cold"]["p50"], s["cached"]["p50"]),
                                       "environment": ratio(s["env_cold"]["p50"], s["env_cached"]["p50"])},
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3; each loads sglang's parser twice)")
    parser.add_argument("--spec", default=DEFAULT_SPEC, help=f"a real sglang build (default {DEFAULT_SPEC})")
    parser.add_argument("--work", type=Path, default=None, help="unused; accepted like the other benchmarks")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON summary here")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    quiet_logging(args.verbose)
    emit(run_benchmark(args.spec, args.rounds), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
