"""Real SGLang on this CPU beside the CPU reference server, in one run: start-up, tree memory, throughput.

The real server is ``pip:sglang==X,deps=cpu`` (real SGLang, plain-torch kernels on CPU: harness.build.sglang_cpu)
serving a tiny random Llama made on the spot; the reference server (a model of SGLang, not SGLang) runs the seed
scenario's model pair at ``post-fix``. Per round and server: seconds from the launch to the ready line, the
resident memory of the whole process tree once ready, and output tokens per second over ``--requests`` greedy
requests of ``--prompt-tokens`` token ids and ``--max-new-tokens`` new tokens, sent one after another. Neither
figure is a GPU figure: they say what the harness costs to run against each on this machine, and how the two
compare in the same run (the ratios).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import statistics
import sys
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psutil
from _common import REPO, SERVER_LABEL, emit, quiet_logging, ratio, start_sim

from harness.build.sglang_cpu import LABEL, ensure_cpu_env, server_environment
from harness.build.sglang_cpu.launch import server_argv
from harness.build.sglang_cpu.tiny_models import make_tiny_llama
from harness.server.lease import lease_port
from harness.server.process import ServerProcess


def _tree_rss_mib(pid: int) -> float:
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return round(total / 2**20, 1)


def _throughput(url: str, requests: int, prompt_tokens: int, max_new: int, vocab: int) -> float:
    rng = random.Random(0)
    produced, began = 0, time.perf_counter()
    for _ in range(requests):
        body = {"input_ids": [rng.randrange(3, vocab) for _ in range(prompt_tokens)],
                "sampling_params": {"max_new_tokens": max_new, "temperature": 0.0, "ignore_eos": True}}
        req = urllib.request.Request(f"{url}/generate", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req, timeout=300) as answer:
            produced += int(json.loads(answer.read())["meta_info"]["completion_tokens"])
    return produced / (time.perf_counter() - began)


def _one(stack: ExitStack, start: Any, args: argparse.Namespace, vocab: int) -> dict[str, float]:
    began = time.perf_counter()
    server: ServerProcess = start(stack)
    ready_s = time.perf_counter() - began
    assert server.pid is not None
    rss = _tree_rss_mib(server.pid)
    tps = _throughput(f"http://127.0.0.1:{server.port}", args.requests, args.prompt_tokens, args.max_new_tokens, vocab)
    return {"ready_s": round(ready_s, 2), "tree_rss_mib": rss, "output_tok_s": round(tps, 2)}


def _median(rows: list[dict[str, float]], key: str) -> float:
    return round(statistics.median(r[key] for r in rows), 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", default="0.5.21", help="the real sglang release (default 0.5.21)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--prompt-tokens", type=int, default=200)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--work", type=Path, default=REPO / "reports" / "benchmarks" / "real_cpu")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    quiet_logging(args.verbose)
    args.work.mkdir(parents=True, exist_ok=True)
    prepared = time.perf_counter()
    venv = ensure_cpu_env(args.release)
    env_s = time.perf_counter() - prepared
    model = make_tiny_llama(args.work / "tiny-llama")
    vocab = int(json.loads((model / "config.json").read_text())["vocab_size"])

    def real(stack: ExitStack) -> ServerProcess:
        port = stack.enter_context(lease_port("127.0.0.1")).port
        server = ServerProcess(server_argv(venv, model, port),
                               env={**os.environ, **server_environment(venv), "PYTHONUNBUFFERED": "1"},
                               host="127.0.0.1", port=port, log_path=args.work / f"real-{secrets.token_hex(3)}.log",
                               run_tag=f"bench-{secrets.token_hex(4)}", startup_timeout_s=600.0)
        stack.callback(server.stop)
        server.start()
        server.wait_ready()
        return server

    def reference(stack: ExitStack) -> ServerProcess:
        return start_sim(stack, "post-fix", "graph", args.work / f"sim-{secrets.token_hex(3)}.log", startup_timeout_s=300.0)

    rows: dict[str, list[dict[str, float]]] = {"real": [], "reference": []}
    for _ in range(args.rounds):  # alternating, so both see the same machine
        for name, start in (("real", real), ("reference", reference)):
            with ExitStack() as stack:
                rows[name].append(_one(stack, start, args, vocab if name == "real" else 256))
    med = {name: {k: _median(r, k) for k in ("ready_s", "tree_rss_mib", "output_tok_s")} for name, r in rows.items()}
    emit({
        "question": "real SGLang on this CPU beside the reference server: start-up, tree memory, throughput",
        "server": f"{LABEL} (sglang {args.release}, tiny Llama) vs {SERVER_LABEL}",
        "release": args.release,
        "env_ready_s": round(env_s, 1),
        "workload": {"requests": args.requests, "prompt_tokens": args.prompt_tokens, "max_new_tokens": args.max_new_tokens},
        "rounds": rows,
        "median": med,
        "ratio_real_to_reference": {k: ratio(med["real"][k], med["reference"][k]) for k in med["real"]},
    }, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
