"""What both benchmarks share: the reference server's flag sets, starting it, summaries, JSON output.

The benchmarks run against the CPU reference server (`harness/sim/`), a model of SGLang's Frozen-KV MTP
mechanism, not SGLang; every figure they print says so in its `server` field.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import sys
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as `python benchmarks/x.py` from any directory
    sys.path.insert(0, str(REPO))

from harness.measure.server_side import percentile  # noqa: E402
from harness.server.lease import lease_port  # noqa: E402
from harness.server.process import ServerProcess  # noqa: E402

__all__ = [
    "REPO",
    "SERVER_LABEL",
    "sim_flags",
    "start_sim",
    "summary",
    "ratio",
    "emit",
    "quiet_logging",
    "revision_parser",
    "alternate_rounds",
]

SERVER_LABEL = "sglang-repro CPU reference server (a model of SGLang's Frozen-KV MTP mechanism, not SGLang)"

# The scenario's model pair, as scenarios/frozen_kv_mtp/long_prompt_stale_out_cache_loc.yaml names it.
_MODEL = ["--model-path", "google/gemma-4-31B-it", "--speculative-algorithm", "NEXTN",
          "--speculative-draft-model-path", "google/gemma-4-31B-it-assistant", "--speculative-eagle-topk", "1"]
_PATHS = {
    # SGLang's own warm-up is skipped: the benchmarks time the crash on their first request, not the warm-up's.
    "eager": ["--speculative-num-steps", "1", "--speculative-num-draft-tokens", "2", "--disable-cuda-graph",
              "--skip-server-warmup"],
    "graph": ["--speculative-num-steps", "5", "--speculative-num-draft-tokens", "6"],
}


def sim_flags(revision: str, path: str, port: int, extra: Sequence[str] = ()) -> list[str]:
    """argv of the reference server at `revision` on the `eager` or `graph` draft path."""
    return [sys.executable, "-m", "harness.sim.server", *_MODEL, *_PATHS[path], *extra,
            "--host", "127.0.0.1", "--port", str(port), "--sim-revision", revision]


def start_sim(
    stack: ExitStack, revision: str, path: str, log_path: Path, *, on_line: Any = None,
    startup_timeout_s: float = 120.0, extra: Sequence[str] = (),
) -> ServerProcess:
    """Start a reference server under `stack` (stopped when it closes) and wait until it is ready."""
    port = stack.enter_context(lease_port("127.0.0.1")).port
    server = ServerProcess(
        sim_flags(revision, path, port, extra), env={**os.environ, "PYTHONUNBUFFERED": "1"}, host="127.0.0.1",
        port=port, log_path=log_path, run_tag=f"bench-{secrets.token_hex(4)}", startup_timeout_s=startup_timeout_s,
        on_line=on_line,
    )
    stack.callback(server.stop)
    server.start()
    server.wait_ready()
    return server


def summary(values: Sequence[float], unit_scale: float = 1000.0) -> dict[str, Any]:
    """n, p50, p95, min, max of `values` (seconds), scaled to milliseconds by default."""
    def scaled(q: float) -> float | None:
        p = percentile(values, q)
        return None if p is None else round(p * unit_scale, 3)

    return {"n": len(values), "p50": scaled(50), "p95": scaled(95), "min": scaled(0), "max": scaled(100)}


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b rounded, or None when either is missing or b is 0."""
    if a is None or b is None or b == 0:
        return None
    return round(a / b, 3)


_LOAD_AT_START = os.getloadavg()


def emit(result: dict[str, Any], out: Path | None, *, benchmark: str | None = None) -> None:
    """Print the JSON summary on stdout (the benchmark's one output), write it to `out` if given, and keep its
    record under benchmarks/results/ (``_results``: the figures the README quotes are rendered from those), named
    ``benchmark`` (default: the script's name)."""
    from _results import record

    record(benchmark or Path(sys.argv[0]).stem, result, load_before=_LOAD_AT_START)
    text = json.dumps(result, indent=2, sort_keys=False)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n", encoding="utf-8")
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def quiet_logging(verbose: bool) -> None:
    """Harness logs go to stderr (stdout carries only the JSON summary); INFO with --verbose."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(message)s")


def revision_parser(doc: str, *, work: Path, timeout_s: float, cold_help: str) -> argparse.ArgumentParser:
    """The options of a benchmark that measures a committed revision in a fresh clone, against an optional baseline
    revision in the same rounds: --rev, --baseline, --rounds, --cold, --timeout-s, --work, --out."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--rev", default="HEAD", help="the revision to measure (committed work only)")
    parser.add_argument("--baseline", default=None, help="a revision measured in the same rounds, alternating")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--cold", action="store_true", help=cold_help)
    parser.add_argument("--timeout-s", type=float, default=timeout_s)
    parser.add_argument("--work", type=Path, default=work)
    parser.add_argument("--out", type=Path, default=None)
    return parser


def alternate_rounds(rev: str, baseline: str | None, rounds: int,
                     measure: Callable[[str, str], dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """``measure(name, rev)`` for the candidate (and the baseline, when given) in turn, ``rounds`` times, so both
    meet the same load; each round's figures on stderr as they come. Name -> its rounds."""
    revs = {"candidate": rev, **({"baseline": baseline} if baseline else {})}
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in revs}
    for _ in range(rounds):
        for name, revision in revs.items():
            out[name].append(measure(name, revision))
            sys.stderr.write(f"{name}: {json.dumps(out[name][-1])}\n")
    return out
