"""The report's client: a self-contained Python script (standard library only, no harness) that sends the workload
that reproduced the finding to a server started with the report's launch command.

The requests are the run's own: the case's seeded prompts made again (``harness.workload.prompts``), held to the
run's manifest (the same content digest), with its warm-up, concurrency, rate, max_new_tokens, temperature and
``ignore_eos``. Where the prompts cannot be made again to the same digest (a fixture whose tokenizer is not here, a
scenario changed by ``--set``, a stateful workload of phases), the script sends the run's first failing request
alone, and says so. Exit status of the script: 0 every request succeeded, 1 one failed (an HTTP error, an error
event, a stream cut before ``data: [DONE]``, an aborted request, a connection refused or reset).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.records.manifest import Manifest
from harness.records.run_record import RunRecord
from harness.scenario import Case
from harness.util.bounded_read import ReadRefused, read_json
from harness.workload.prompts import Prompt

__all__ = ["ClientScript", "client_script"]


@dataclass(frozen=True)
class ClientScript:
    text: str
    summary: str  # one line: what it sends
    note: str = ""  # why it sends less than the run did, when it does


def _prompts(case: Case) -> list[Prompt] | None:
    from harness.scenario.model import TokenRange
    from harness.util.errors import HarnessError
    from harness.workload.prompts import prompt_lengths, random_id_prompts

    wl = case.scenario.workload
    spec = wl.prompt
    if spec.source != "random-ids" or wl.phases:
        return None  # a fixture needs the model's tokenizer; phases are the harness's own choreography
    tokens: Any = range(spec.tokens.start, spec.tokens.stop, spec.tokens.step) if isinstance(spec.tokens, TokenRange) \
        else spec.tokens
    try:
        return random_id_prompts(prompt_lengths(tokens, wl.warmup + wl.requests, spec.seed), seed=spec.seed,
                                 vocab=spec.vocab)
    except HarnessError:
        return None


def _same_prompts(prompts: Sequence[Prompt], manifest: Manifest | None) -> bool:
    from harness.workload.driver import _prompts_digest  # the digest the run's manifest holds

    return manifest is not None and bool(manifest.prompts_sha256) and _prompts_digest(prompts) == manifest.prompts_sha256


def _first_request(run_dir: Path | None) -> dict[str, Any] | None:
    if run_dir is None:
        return None
    try:
        data = read_json(run_dir / "first_failing_request.json", "record")
    except (ReadRefused, OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def client_script(record: RunRecord, case: Case | None, run_dir: Path | None, title: str) -> ClientScript | None:
    """The script, or None when neither the prompts nor the first failing request can be had."""
    manifest = record.manifest
    prompts = _prompts(case) if case is not None else None
    if prompts is not None and manifest is not None and _same_prompts(prompts, manifest):
        bodies = [_body(p, manifest) for p in prompts]
        warmup, n = manifest.warmup, manifest.requests
        lengths = sorted({p.tokens for p in prompts[warmup:]})
        shown = f"{lengths[0]}" if len(lengths) == 1 else f"{lengths[0]}-{lengths[-1]}"
        summary = (f"{n} request(s) of {shown} prompt tokens (seed {case.scenario.workload.prompt.seed if case else '?'})"
                   f", max_new_tokens {manifest.max_new_tokens}, concurrency {manifest.concurrency}"
                   + (f", {manifest.request_rate:g} requests/s" if manifest.request_rate else "")
                   + (f", after {warmup} warm-up request(s)" if warmup else ""))
        return ClientScript(_render(title, summary, bodies, warmup, manifest.concurrency, manifest.request_rate), summary)
    first = _first_request(run_dir)
    if first is None:
        return None
    why = ("the run's prompts could not be made again to the digest its manifest holds (a fixture's tokenizer, a "
           "workload of phases, or a scenario changed by --set)")
    summary = f"the run's first failing request alone ({len(first.get('input_ids') or [])} prompt tokens)"
    return ClientScript(_render(title, summary, [first], 0, 1, None), summary, why)


def _body(prompt: Prompt, manifest: Manifest) -> dict[str, Any]:
    from harness.workload.driver import request_body

    return request_body(prompt, max_new_tokens=manifest.max_new_tokens, ignore_eos=manifest.ignore_eos,
                        temperature=manifest.temperature, stream=manifest.stream)


def _render(title: str, summary: str, bodies: Sequence[dict[str, Any]], warmup: int, concurrency: int,
            rate: float | None) -> str:
    data = json.dumps(list(bodies), separators=(",", ":"))
    head = (f'"""Reproduces: {title}\n\nSends {summary} to SGLang\'s native /generate, as the run that found it did.\n'
            'Written by sglang-repro; needs only Python 3 (standard library). Start the server with the report\'s\n'
            'launch command first.\n\nUsage: python3 client.py [--host 127.0.0.1] [--port 30000] [--timeout 600]\n'
            'Exit status: 0 every request succeeded, 1 a request failed (printed), 2 bad usage.\n"""\n')
    head = head.replace("\\", "\\\\")
    return (head + _TEMPLATE.replace("@WARMUP@", str(warmup)).replace("@CONCURRENCY@", str(concurrency))
            .replace("@RATE@", repr(rate)).replace("@BODIES@", repr(data)))


_TEMPLATE = '''
import argparse
import json
import random
import sys
import threading
import time
import urllib.error
import urllib.request

WARMUP = @WARMUP@  # the first WARMUP bodies are sent first, then the rest
CONCURRENCY = @CONCURRENCY@
REQUEST_RATE = @RATE@  # requests/s (Poisson arrivals); None: each as soon as a slot is free
BODIES = json.loads(@BODIES@)


def send(url, body, timeout, tokens):
    """None when the request succeeded, else why it did not; its output tokens are added to ``tokens``."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            if not body.get("stream"):
                out = json.loads(resp.read().decode("utf-8", "replace") or "{}")
                tokens.append((out.get("meta_info") or {}).get("completion_tokens") or 0)
                if "error" in out:
                    return "server error: " + json.dumps(out["error"])[:300]
                finish = (out.get("meta_info") or {}).get("finish_reason") or {}
                return "aborted: " + str(finish.get("message", "")) if finish.get("type") == "abort" else None
            last = 0
            for raw in resp:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    tokens.append(last)
                    return None
                event = json.loads(payload)
                last = (event.get("meta_info") or {}).get("completion_tokens") or last
                if "error" in event:
                    return "server error: " + json.dumps(event["error"])[:300]
                finish = (event.get("meta_info") or {}).get("finish_reason") or {}
                if isinstance(finish, dict) and finish.get("type") == "abort":
                    return "aborted: " + str(finish.get("message", ""))
            return "the stream ended before data: [DONE]"
    except urllib.error.HTTPError as exc:
        return "HTTP %d: %s" % (exc.code, exc.read()[:300].decode("utf-8", "replace"))
    except (urllib.error.URLError, ConnectionError, OSError, ValueError) as exc:
        return "%s: %s" % (type(exc).__name__, getattr(exc, "reason", exc))


def run(url, bodies, timeout, rate, tokens):
    failures = []
    slots = threading.Semaphore(CONCURRENCY)
    threads = []
    clock = random.Random(0)
    due = time.monotonic()

    def one(i, body):
        try:
            why = send(url, body, timeout, tokens)
            if why is not None:
                failures.append((i, why))
        finally:
            slots.release()

    for i, body in enumerate(bodies):
        if rate:
            due += clock.expovariate(rate)
            time.sleep(max(0.0, due - time.monotonic()))
        slots.acquire()
        t = threading.Thread(target=one, args=(i, body), daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    return sorted(failures)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    args = parser.parse_args()
    url = "http://%s:%d/generate" % (args.host, args.port)
    failed = run(url, BODIES[:WARMUP], args.timeout, None, []) if WARMUP else []
    tokens = []
    start = time.monotonic()
    failed += [(i + WARMUP, why) for i, why in run(url, BODIES[WARMUP:], args.timeout, REQUEST_RATE, tokens)]
    took = time.monotonic() - start
    for i, why in failed:
        print("request %d failed: %s" % (i, why))
    print("%d of %d request(s) failed; %d output tokens of the measured requests in %.2f s (%.1f tokens/s)"
          % (len(failed), len(BODIES), sum(tokens), took, sum(tokens) / took if took > 0 else 0.0))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
'''
