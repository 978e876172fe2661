"""The harness's workload client beside SGLang's `bench_serving`, on one reference server, in one run.

Usage: python benchmarks/bench_workload_client.py [--rounds 5] [--num-prompts 64] [--input-len 128]
       [--output-len 32] [--concurrency 4] [--sglang-python PATH] [--out FILE]

One post-fix reference server (graph draft path) serves every run. The two clients run alternately, A B A B,
with the same N prompts (the exact token ids bench_serving's random-ids dataset makes), M output tokens
(ignore_eos), unbounded request rate, at most
C in flight, one warmup request each, and the server's cache flushed before each run.

CPU cost. Each client is its own process, started by `_measure_cpu.py` in the client's interpreter: it
imports the client's modules first, then runs the client's `__main__` and records the user + system CPU
seconds of that part (all threads, plus waited-for children; `resource.getrusage`). That "work CPU" covers
argument parsing, tokenizer and prompt preparation, the warmup request and the N measured requests, and
leaves out interpreter start and imports (torch and transformers for bench_serving, seconds of CPU that say
nothing about the client loop). The whole-process CPU, from `os.wait4`, is reported too. Per-request CPU is
work CPU / N, averaged over the rounds. The server shares the machine, so a costly client also slows it.

Throughput is each client's own report: `output_throughput` from bench_serving's JSONL output, and
`output_throughput_tok_s` of `harness.measure.server_side.aggregate` for the harness. Ratios are harness / bench_serving.

`bench_serving` comes from an sglang installed without its dependencies (`pip:sglang==0.5.15,deps=none`,
created by `sglang-repro prepare` if missing, or `--sglang-python`), with the import stubs of
`fixtures/bench_serving_stubs` (an import-only `datasets`) on PYTHONPATH and the reference server's tokenizer written by
`python -m harness.sim.tokenizer`. If it cannot run, the summary says why and reports the harness side only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from _common import REPO, SERVER_LABEL, emit, quiet_logging, ratio, start_sim

# At module level, so that the preimports of the measured child cover every import the client mode uses.
from harness.measure.server_side import aggregate
from harness.workload.driver import run_workload_sync
from harness.workload.prompts import Prompt

__all__ = ["main", "run_benchmark"]

SGLANG_SPEC = "pip:sglang==0.5.15,deps=none"
STUBS = REPO / "fixtures" / "bench_serving_stubs"  # datasets only: the deps=none env has the triton/torchvision stubs
MEASURE = Path(__file__).resolve().parent / "_measure_cpu.py"
# Imported before the measured part starts, so "work CPU" leaves out interpreter start and imports.
HARNESS_PREIMPORTS = "_common,harness.measure.server_side,harness.workload.prompts,harness.workload.driver"
BENCH_SERVING_PREIMPORTS = "sglang.benchmark.serving"
PROMPT_SEED = 42  # bench_serving's default --seed
VOCAB_SIZE = 256  # `vocab_size` of the reference server's tokenizer as transformers loads it (no specials)


def _reap(argv: list[str], env: dict[str, str], log_path: Path, timeout_s: float) -> tuple[int, float, float]:
    """Run argv to completion; (exit code, CPU seconds user+sys of it and its children, wall seconds)."""
    began = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                cwd=REPO, start_new_session=True)
    deadline = began + timeout_s
    try:
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                return proc.returncode, usage.ru_utime + usage.ru_stime, time.monotonic() - began
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{argv[:3]} still running after {timeout_s:g} s (log: {log_path})")
            time.sleep(0.02)
    finally:
        if proc.returncode is None:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=10)


def _last_line(path: Path) -> str:
    lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "(no output)"


def bench_serving_ids(n: int, input_len: int, output_len: int) -> list[tuple[int, ...]]:
    """The token ids `bench_serving --dataset-name random-ids --tokenize-prompt --random-range-ratio 1` sends.

    Its recipe (sglang 0.5.15, benchmark/datasets/random.py): seed numpy's global generator, draw the input
    and the output lengths (`randint(L, L + 1)`, fixed at range ratio 1), draw one offset per prompt below
    the tokenizer's `vocab_size` (256 base tokens for the reference server's byte tokenizer), and use
    `(offset_i + i + j) % vocab_size` as token j of prompt i. Sending the same ids keeps the server's work
    (prefix reuse, draft acceptance) the same for both clients, so only the clients differ.
    """
    import numpy as np

    np.random.seed(PROMPT_SEED)
    np.random.randint(input_len, input_len + 1, size=n)
    np.random.randint(output_len, output_len + 1, size=n)
    offsets = np.random.randint(0, VOCAB_SIZE, size=n)
    return [tuple(int((offsets[i] + i + j) % VOCAB_SIZE) for j in range(input_len)) for i in range(n)]


# ----- the harness client, run as its own process ---------------------------------------------------


def drive_harness(url: str, n: int, input_len: int, output_len: int, concurrency: int, out: Path) -> int:
    """Child mode: one warmup + n measured requests through harness.workload.driver; metrics to `out`."""
    ids = bench_serving_ids(n, input_len, output_len)
    # bench_serving's warmup request is its first prompt again; then the n measured ones.
    prompts = [Prompt(input_ids=x, text=None, tokens=len(x)) for x in (ids[0], *ids)]
    result = run_workload_sync(
        url, prompts, concurrency=concurrency, request_rate=None, max_new_tokens=output_len, ignore_eos=True,
        temperature=0.0, stream=True, warmup=1, request_timeout_s=300.0, jsonl_path=None, progress=False,
    )
    out.write_text(json.dumps(aggregate(result.records, result.measured_wall_s)), encoding="utf-8")
    return 0


# ----- the benchmark -------------------------------------------------------------------------------


class Clients:
    """How to launch each client and read its figures."""

    def __init__(self, url: str, args: argparse.Namespace, work: Path, sglang_python: str | None) -> None:
        self.url, self.args, self.work = url, args, work
        self.sglang_python = sglang_python
        self.tokenizer = work / "tokenizer"
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        # bench_serving asks the Hub about the served model name; there is no network and nothing to fetch.
        self.bs_env = {**self.env, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                       "PYTHONPATH": os.pathsep.join(p for p in (str(STUBS), os.environ.get("PYTHONPATH")) if p)}

    def harness_argv(self, out: Path, cpu_out: Path) -> list[str]:
        a = self.args
        return [sys.executable, str(MEASURE), str(cpu_out), HARNESS_PREIMPORTS, str(Path(__file__).resolve()),
                "--drive-harness", self.url, "--out", str(out),
                "--num-prompts", str(a.num_prompts), "--input-len", str(a.input_len),
                "--output-len", str(a.output_len), "--concurrency", str(a.concurrency)]

    def bench_serving_argv(self, out: Path, cpu_out: Path) -> list[str]:
        a = self.args
        assert self.sglang_python is not None
        return [self.sglang_python, str(MEASURE), str(cpu_out), BENCH_SERVING_PREIMPORTS, "sglang.bench_serving",
                "--backend", "sglang", "--base-url", self.url,
                "--dataset-name", "random-ids", "--tokenizer", str(self.tokenizer),
                "--num-prompts", str(a.num_prompts), "--random-input-len", str(a.input_len),
                "--random-output-len", str(a.output_len), "--random-range-ratio", "1",  # exactly L and M
                "--request-rate", "inf", "--max-concurrency", str(a.concurrency), "--seed", str(PROMPT_SEED),
                "--tokenize-prompt",  # send token ids, as the harness does, not re-tokenized text
                "--disable-tqdm", "--output-file", str(out)]

    def run(self, side: str, round_no: int) -> dict[str, Any]:
        _flush(self.url)
        log = self.work / f"{side}-{round_no}.log"
        out = self.work / f"{side}-{round_no}.{'json' if side == 'harness' else 'jsonl'}"
        cpu_out = self.work / f"{side}-{round_no}.cpu.json"
        for stale in (out, cpu_out):
            stale.unlink(missing_ok=True)  # bench_serving appends
        argv = self.harness_argv(out, cpu_out) if side == "harness" else self.bench_serving_argv(out, cpu_out)
        env = self.env if side == "harness" else self.bs_env
        code, process_cpu, wall = _reap(argv, env, log, self.args.client_timeout_s)
        if code != 0 or not out.exists() or not cpu_out.exists():
            raise RuntimeError(f"{side} round {round_no} exited {code}: {_last_line(log)}")
        work_cpu = json.loads(cpu_out.read_text())["cpu_s"]
        if side == "harness":
            m = json.loads(out.read_text())
            tput, ok = m["output_throughput_tok_s"], m["requests_ok"]
        else:
            m = json.loads(out.read_text().strip().splitlines()[-1])
            tput, ok = m["output_throughput"], m["completed"]
        return {"side": side, "round": round_no, "output_throughput_tok_s": round(tput, 3), "requests_ok": ok,
                "work_cpu_s": round(work_cpu, 3), "process_cpu_s": round(process_cpu, 3),
                "process_wall_s": round(wall, 3)}


def _flush(url: str) -> None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(urllib.request.Request(url + "/flush_cache", method="POST"), timeout=30) as resp:
        resp.read()


def _resolve_sglang_python(explicit: str | None) -> tuple[str | None, str | None]:
    """(python, None) or (None, why bench_serving is unavailable)."""
    if explicit is not None:
        if explicit and Path(explicit).exists():
            return explicit, None
        return None, f"--sglang-python {explicit!r}: no such interpreter"
    try:
        from harness.build import resolve_build
        from harness.util.errors import HarnessError

        return resolve_build(SGLANG_SPEC).python, None
    except HarnessError as exc:
        return None, f"{SGLANG_SPEC} cannot be prepared: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"


def _side(rows: list[dict[str, Any]], n: int) -> dict[str, Any]:
    tputs = [r["output_throughput_tok_s"] for r in rows]
    work = [r["work_cpu_s"] for r in rows]
    whole = [r["process_cpu_s"] for r in rows]
    return {
        "runs": len(rows),
        "output_throughput_tok_s": {"mean": round(statistics.fmean(tputs), 3),
                                    "median": round(statistics.median(tputs), 3), "values": tputs},
        "work_cpu_s": {"mean": round(statistics.fmean(work), 3), "values": work},
        "process_cpu_s": {"mean": round(statistics.fmean(whole), 3), "values": whole},
        "cpu_ms_per_request": round(statistics.fmean(work) / n * 1000, 3),
        "cpu_ms_per_request_whole_process": round(statistics.fmean(whole) / n * 1000, 3),
    }


def run_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    from harness.sim.tokenizer import write_hf_tokenizer

    sglang_python, unavailable = (None, "--no-bench-serving given") if args.no_bench_serving else \
        _resolve_sglang_python(args.sglang_python)
    with ExitStack() as stack:
        server = start_sim(stack, "post-fix", "graph", work / "server.log")
        clients = Clients(server.url, args, work, sglang_python)
        write_hf_tokenizer(clients.tokenizer)
        sides = ["harness"] + (["bench_serving"] if sglang_python is not None else [])
        rows: list[dict[str, Any]] = []
        for r in range(args.rounds):
            for side in list(sides):  # A B A B: drift of the shared machine falls on both
                try:
                    rows.append(clients.run(side, r))
                except RuntimeError as exc:
                    if side == "harness":
                        raise
                    # Reported, not papered over: no bench_serving figures and no ratios from a partial set.
                    unavailable = f"sglang.bench_serving failed: {exc}"
                    sides.remove(side)
                    rows = [x for x in rows if x["side"] != side]
    n = args.num_prompts
    result: dict[str, Any] = {
        "benchmark": "workload_client",
        "server": SERVER_LABEL + "; post-fix, graph draft path",
        "workload": {"num_prompts": n, "input_len": args.input_len, "output_len": args.output_len,
                     "concurrency": args.concurrency, "request_rate": "inf", "warmup_requests": 1,
                     "rounds": args.rounds, "order": "A B A B (harness first)"},
        "harness": _side([x for x in rows if x["side"] == "harness"], n),
    }
    if "bench_serving" in sides:
        bs = _side([x for x in rows if x["side"] == "bench_serving"], n)
        h = result["harness"]
        result["bench_serving"] = {**bs, "python": sglang_python}
        result["ratio_harness_over_bench_serving"] = {
            "output_throughput": ratio(h["output_throughput_tok_s"]["mean"], bs["output_throughput_tok_s"]["mean"]),
            "output_throughput_median": ratio(h["output_throughput_tok_s"]["median"],
                                              bs["output_throughput_tok_s"]["median"]),
            "cpu_per_request": ratio(h["cpu_ms_per_request"], bs["cpu_ms_per_request"]),
            "cpu_per_request_whole_process": ratio(h["cpu_ms_per_request_whole_process"],
                                                   bs["cpu_ms_per_request_whole_process"]),
        }
    else:
        result["bench_serving"] = {"available": False, "why": unavailable}
    result["runs"] = rows
    result["wall_s"] = round(time.monotonic() - began, 1)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="A B rounds (default 5)")
    parser.add_argument("--num-prompts", type=int, default=64, help="measured requests per run (default 64)")
    parser.add_argument("--input-len", type=int, default=128, help="prompt tokens (default 128)")
    parser.add_argument("--output-len", type=int, default=32, help="output tokens, ignore_eos (default 32)")
    parser.add_argument("--concurrency", type=int, default=4, help="max requests in flight (default 4)")
    parser.add_argument("--sglang-python", default=None,
                        help=f"interpreter with sglang for bench_serving (default: the {SGLANG_SPEC} build)")
    parser.add_argument("--no-bench-serving", action="store_true", help="run the harness side only")
    parser.add_argument("--client-timeout-s", type=float, default=600.0, help="bound on each client process")
    parser.add_argument("--work", type=Path, default=Path("reports/benchmarks/workload_client"),
                        help="folder for logs, client outputs and the tokenizer")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON summary here")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--drive-harness", metavar="URL", help=argparse.SUPPRESS)  # child mode
    args = parser.parse_args(argv)
    if args.drive_harness:
        return drive_harness(args.drive_harness, args.num_prompts, args.input_len, args.output_len,
                             args.concurrency, args.out)
    if min(args.rounds, args.num_prompts, args.input_len, args.output_len, args.concurrency) < 1:
        parser.error("--rounds, --num-prompts, --input-len, --output-len and --concurrency must be >= 1")
    quiet_logging(args.verbose)
    args.work = args.work.resolve()
    emit(run_benchmark(args), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
