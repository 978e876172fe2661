"""The workload client's own ceiling, against a minimal no-op streaming server, beside `sglang.bench_serving`.

Usage: python benchmarks/bench_client_ceiling.py [--rates 25,50,100,200,400,800] [--seconds 2]
       [--concurrency 256] [--closed-concurrency 64] [--closed-requests 800] [--sglang-python PATH] [--out FILE]

The server (`benchmarks/noop_server.py`, its own process) answers every request at once with 4 events of 4
tokens: whatever limits throughput is the client (and the machine both share). Two measurements:

- Open loop, the ceiling. The harness client sends Poisson arrivals at each rate of `--rates` (capped at
  `--concurrency` in flight) for about `--seconds` each (at least 50 requests) and records, per request, when
  it was due and when it was sent. The ceiling is the highest rate whose p99 scheduling delay (sent - due)
  stays at or under 10 ms; its achieved requests/s and output tokens/s are reported, with the first rate
  past it. `bench_serving` runs the same rates (same Poisson process, same cap) and reports its achieved
  request throughput (completed / its own duration); it does not measure how late it sent, so achieved vs
  requested rate is its only saturation signal.
- Closed loop, the top speed: `--closed-requests` requests with `--closed-concurrency` in flight and no rate
  limit, both clients; requests/s and output tokens/s as each reports them.

`bench_serving` comes from the `pip:sglang==0.5.15,deps=none` environment (see bench_workload_client.py),
with token ids (`--tokenize-prompt`) from the reference server's byte tokenizer. If it cannot run, the
summary says why and reports the harness side alone.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from _common import REPO, emit, quiet_logging

from harness.measure.client_side import CLIENT_BEHIND_MS, derive_metrics
from harness.server.lease import lease_port
from harness.workload.driver import run_workload_sync
from harness.workload.prompts import random_id_prompts

__all__ = ["main", "run_benchmark"]

SGLANG_SPEC = "pip:sglang==0.5.15,deps=none"
STUBS = REPO / "fixtures" / "bench_serving_stubs"
NOOP = Path(__file__).resolve().parent / "noop_server.py"
SERVER_LABEL = "no-op streaming server (benchmarks/noop_server.py: 4 events x 4 tokens at once; not SGLang)"
INPUT_LEN = OUTPUT_LEN = 16


def _start_noop(stack: ExitStack, log_path: Path) -> str:
    port = stack.enter_context(lease_port("127.0.0.1")).port
    log = stack.enter_context(log_path.open("wb"))
    proc = subprocess.Popen([sys.executable, str(NOOP), "--port", str(port)], stdout=subprocess.PIPE, stderr=log,
                            start_new_session=True)

    def stop() -> None:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)

    stack.callback(stop)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != b"ready":
        raise RuntimeError(f"no-op server did not start (log: {log_path})")
    return f"http://127.0.0.1:{port}"


def _harness(url: str, n: int, rate: float | None, concurrency: int) -> dict[str, Any]:
    prompts = random_id_prompts([INPUT_LEN] * n, seed=42, vocab=(0, 256))
    result = run_workload_sync(url, prompts, concurrency=concurrency, request_rate=rate, max_new_tokens=OUTPUT_LEN,
                               ignore_eos=True, temperature=0.0, stream=True, warmup=0, request_timeout_s=60.0,
                               jsonl_path=None, progress=False)
    m = derive_metrics(result.records, result.trace, result.manifest)
    keys = ("requests_ok", "achieved_rate_rps", "request_throughput_rps", "output_throughput_tok_s",
            "sched_delay_ms_p50", "sched_delay_ms_p99", "loop_lag_ms_p99", "client_cpu_fraction",
            "concurrency_max", "client_fell_behind")
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in ((k, m[k]) for k in keys)}


def _bench_serving(python: str, url: str, tokenizer: Path, work: Path, n: int, rate: float | None,
                   concurrency: int, tag: str, timeout_s: float) -> dict[str, Any]:
    out = work / f"bench_serving-{tag}.jsonl"
    out.unlink(missing_ok=True)
    argv = [python, "-m", "sglang.bench_serving", "--backend", "sglang", "--base-url", url,
            "--dataset-name", "random-ids", "--tokenizer", str(tokenizer), "--num-prompts", str(n),
            "--random-input-len", str(INPUT_LEN), "--random-output-len", str(OUTPUT_LEN), "--random-range-ratio", "1",
            "--request-rate", "inf" if rate is None else str(rate), "--max-concurrency", str(concurrency),
            "--seed", "42", "--tokenize-prompt", "--disable-tqdm", "--warmup-requests", "0", "--output-file", str(out)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(STUBS), os.environ.get("PYTHONPATH")) if p)}
    log = work / f"bench_serving-{tag}.log"
    with log.open("wb") as fh:
        proc = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, env=env, timeout=timeout_s, cwd=REPO,
                              check=False)
    if proc.returncode != 0 or not out.exists():
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
        raise RuntimeError(f"bench_serving exited {proc.returncode}: {tail[0][:300]}")
    m = json.loads(out.read_text().strip().splitlines()[-1])
    duration = m.get("duration") or 0
    achieved = round(m["completed"] / duration, 3) if duration else None
    return {"requests_ok": m["completed"], "achieved_rate_rps": achieved,
            "request_throughput_rps": round(m["request_throughput"], 3),
            "output_throughput_tok_s": round(m["output_throughput"], 3)}


def _resolve_sglang_python(explicit: str | None) -> tuple[str | None, str | None]:
    if explicit is not None:
        return (explicit, None) if Path(explicit).exists() else (None, f"--sglang-python {explicit!r}: no such file")
    try:
        from harness.build import resolve_build
        from harness.util.errors import HarnessError

        return resolve_build(SGLANG_SPEC).python, None
    except HarnessError as exc:
        return None, f"{SGLANG_SPEC} cannot be prepared: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"


def run_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    python, unavailable = (None, "--no-bench-serving given") if args.no_bench_serving else \
        _resolve_sglang_python(args.sglang_python)
    tokenizer = work / "tokenizer"
    from harness.sim.tokenizer import write_hf_tokenizer

    write_hf_tokenizer(tokenizer)
    sweep: list[dict[str, Any]] = []
    with ExitStack() as stack:
        url = _start_noop(stack, work / "noop_server.log")
        _harness(url, 20, None, 4)  # warm the server's code paths once, outside every figure
        for rate in args.rates:
            n = max(50, int(rate * args.seconds))
            row: dict[str, Any] = {"requested_rate_rps": rate, "requests": n,
                                   "harness": _harness(url, n, rate, args.concurrency)}
            if python is not None:
                try:
                    row["bench_serving"] = _bench_serving(python, url, tokenizer, work, n, rate, args.concurrency,
                                                          f"rate{rate:g}", args.client_timeout_s)
                except (RuntimeError, subprocess.TimeoutExpired) as exc:
                    unavailable, python = f"sglang.bench_serving failed: {exc}", None
            sweep.append(row)
        closed: dict[str, Any] = {"concurrency": args.closed_concurrency, "requests": args.closed_requests,
                                  "harness": _harness(url, args.closed_requests, None, args.closed_concurrency)}
        if python is not None:
            try:
                closed["bench_serving"] = _bench_serving(python, url, tokenizer, work, args.closed_requests, None,
                                                         args.closed_concurrency, "closed", args.client_timeout_s)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                unavailable, python = f"sglang.bench_serving failed: {exc}", None
    keeps_up = [r for r in sweep if (r["harness"]["sched_delay_ms_p99"] or 0) <= CLIENT_BEHIND_MS]
    past = [r for r in sweep if (r["harness"]["sched_delay_ms_p99"] or 0) > CLIENT_BEHIND_MS]
    best = max(keeps_up, key=lambda r: r["requested_rate_rps"]) if keeps_up else None
    ceiling = None if best is None else {
        "rule": f"highest requested rate with scheduling delay p99 <= {CLIENT_BEHIND_MS:g} ms",
        "requested_rate_rps": best["requested_rate_rps"],
        "achieved_rate_rps": best["harness"]["achieved_rate_rps"],
        "output_throughput_tok_s": best["harness"]["output_throughput_tok_s"],
        "first_rate_past_it": min((r["requested_rate_rps"] for r in past if r["requested_rate_rps"] >
                                   best["requested_rate_rps"]), default=None),
    }
    return {
        "benchmark": "client_ceiling",
        "server": SERVER_LABEL,
        "workload": {"input_len": INPUT_LEN, "output_tokens": OUTPUT_LEN, "events_per_request": 4,
                     "open_loop_concurrency_cap": args.concurrency, "seconds_per_rate": args.seconds},
        "harness_ceiling": ceiling,
        "sweep": sweep,
        "closed_loop": closed,
        "bench_serving": {"available": python is not None, **({"why": unavailable} if python is None else {})},
        "wall_s": round(time.monotonic() - began, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=lambda s: [float(x) for x in s.split(",")],
                        default=[25, 50, 100, 200, 400, 800],
                        help="open-loop request rates, comma-separated (default 25,50,100,200,400,800)")
    parser.add_argument("--seconds", type=float, default=2.0, help="about how long each rate runs (default 2)")
    parser.add_argument("--concurrency", type=int, default=256, help="open-loop cap on requests in flight")
    parser.add_argument("--closed-concurrency", type=int, default=64, help="closed-loop requests in flight")
    parser.add_argument("--closed-requests", type=int, default=800, help="closed-loop requests")
    parser.add_argument("--sglang-python", default=None, help=f"interpreter with sglang (default: {SGLANG_SPEC})")
    parser.add_argument("--no-bench-serving", action="store_true", help="run the harness side only")
    parser.add_argument("--client-timeout-s", type=float, default=300.0, help="bound on each bench_serving run")
    parser.add_argument("--work", type=Path, default=Path("reports/benchmarks/client_ceiling"))
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON summary here")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    if not args.rates or min(args.rates) <= 0 or args.seconds <= 0 or min(args.concurrency, args.closed_concurrency,
                                                                          args.closed_requests) < 1:
        parser.error("--rates must be > 0; --seconds, --concurrency, --closed-* must be >= 1")
    quiet_logging(args.verbose)
    args.work = args.work.resolve()
    emit(run_benchmark(args), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
