"""``sglang-repro metrics RUN_DIR``: recompute a run's workload metrics from its ``requests.jsonl``."""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path
from typing import Any

from harness.bounded_read import read_json
from harness.errors import EXIT_FAIL, EXIT_OK, UserError

__all__ = ["DESCRIPTION", "add_arguments", "main", "recompute"]

DESCRIPTION = (
    "Recompute every workload metric of a run from the raw records in its requests.jsonl (send times, "
    "every streamed event with the server's token count, the client's own trace), with the one function "
    "that made them (harness.derive.derive_metrics), and check them against the run's result.json. "
    "Exit status: 0 every recomputed figure equals result.json's (or there is no result.json), "
    "1 some figure differs, 2 bad input (no such run, a requests.jsonl without raw timings)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", type=Path, metavar="RUN", help="a run folder (reports/runs/<id>) or a requests.jsonl")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format (default text)")


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def recompute(run: Path) -> dict[str, Any]:
    """The recomputed metrics and, where result.json has the same key, whether it agrees."""
    from harness.derive import derive_metrics, not_comparable
    from harness.request_log import read_requests_jsonl

    path = run / "requests.jsonl" if run.is_dir() else run
    if not path.is_file():
        raise UserError(f"{path}: no such file (a run folder holds requests.jsonl)")
    log = read_requests_jsonl(path)
    metrics = derive_metrics(log.records, log.trace, log.manifest)
    stored: dict[str, Any] | None = None
    result_path = path.parent / "result.json"
    if os.path.lexists(result_path):
        data = read_json(result_path, "record")  # a link to /dev/zero or a FIFO is refused, not read
        raw = data.get("metrics") if isinstance(data, dict) else None
        stored = raw if isinstance(raw, dict) else {}
    differs = {k: {"recomputed": v, "result_json": stored[k]} for k, v in metrics.items()
               if stored is not None and k in stored and not _same(v, stored[k])}
    missing = sorted(k for k in metrics if stored is not None and k not in stored)
    return {
        "requests_jsonl": str(path),
        "manifest": log.manifest.to_dict() if log.manifest else None,
        "metrics": metrics,
        "not_comparable": not_comparable(metrics),
        "result_json": str(result_path) if stored is not None else None,
        "differs": differs,
        "not_in_result_json": missing,
    }


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def main(args: argparse.Namespace) -> int:
    out = recompute(args.run)
    if args.format == "json":
        print(json.dumps(out, indent=2, sort_keys=True))
        return EXIT_FAIL if out["differs"] else EXIT_OK
    print(f"recomputed from {out['requests_jsonl']}")
    m = out["manifest"]
    if m:
        rate = "unlimited" if m["request_rate"] is None else f"{m['request_rate']:g} req/s"
        pl = m["prompt_lengths"]
        print(f"manifest: {m['loop']} loop, rate {rate}, concurrency {m['concurrency']}, {m['requests']} requests "
              f"(+{m['warmup']} warm-up), max_new_tokens {m['max_new_tokens']}, temperature {m['temperature']:g}, "
              f"ignore_eos {str(m['ignore_eos']).lower()}, stream {str(m['stream']).lower()}, prompts "
              f"{pl['min']}-{pl['max']} tokens (mean {pl['mean']:g}), tokens counted by {m['token_counter']}")
    if out["not_comparable"]:
        print(f"NOT COMPARABLE: {out['not_comparable']}")
    stored = out["result_json"] is not None
    for name, value in out["metrics"].items():
        if not stored or name in out["not_in_result_json"]:
            note = "" if not stored else "  (not in result.json)"
        elif name in out["differs"]:
            note = f"  DIFFERS: result.json has {_fmt(out['differs'][name]['result_json'])}"
        else:
            note = "  = result.json"
        print(f"{name:34} {_fmt(value):>14}{note}")
    if stored:
        print(f"{len(out['differs'])} figure(s) differ from {out['result_json']}")
    return EXIT_FAIL if out["differs"] else EXIT_OK
