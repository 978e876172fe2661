"""``sglang-repro metrics RUN_DIR``: recompute a run's workload metrics from its ``requests.jsonl``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from harness.measure.server_side import recompute
from harness.util.errors import EXIT_FAIL, EXIT_OK

__all__ = ["DESCRIPTION", "add_arguments", "main"]

DESCRIPTION = (
    "Recompute every workload metric of a run from the raw records in its requests.jsonl (send times, "
    "every streamed event with the server's token count, the client's own trace), with the one function "
    "that made them (harness.measure.client_side.derive_metrics), and check them against the run's result.json. "
    "Exit status: 0 every recomputed figure equals result.json's (or there is no result.json), "
    "1 some figure differs, 2 bad input (no such run, a requests.jsonl without raw timings)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", type=Path, metavar="RUN", help="a run folder (reports/runs/<id>) or a requests.jsonl")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format (default text)")


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def main(args: argparse.Namespace) -> int:
    out = recompute(args.run)
    if args.format == "json":
        print(json.dumps(out.to_dict(), indent=2, sort_keys=True))
        return EXIT_FAIL if out.differs else EXIT_OK
    print(f"recomputed from {out.requests_jsonl}")
    m = out.manifest
    if m:
        rate = "unlimited" if m["request_rate"] is None else f"{m['request_rate']:g} req/s"
        pl = m["prompt_lengths"]
        print(f"manifest: {m['loop']} loop, rate {rate}, concurrency {m['concurrency']}, {m['requests']} requests "
              f"(+{m['warmup']} warm-up), max_new_tokens {m['max_new_tokens']}, temperature {m['temperature']:g}, "
              f"ignore_eos {str(m['ignore_eos']).lower()}, stream {str(m['stream']).lower()}, prompts "
              f"{pl['min']}-{pl['max']} tokens (mean {pl['mean']:g}), tokens counted by {m['token_counter']}")
    if out.not_comparable:
        print(f"NOT COMPARABLE: {out.not_comparable}")
    stored = out.result_json is not None
    for name, value in out.metrics.items():
        if not stored or name in out.not_in_result_json:
            note = "" if not stored else "  (not in result.json)"
        elif name in out.differs:
            note = f"  DIFFERS: result.json has {_fmt(out.differs[name]['result_json'])}"
        else:
            note = "  = result.json"
        print(f"{name:34} {_fmt(value):>14}{note}")
    if stored:
        print(f"{len(out.differs)} figure(s) differ from {out.result_json}")
    return EXIT_FAIL if out.differs else EXIT_OK
