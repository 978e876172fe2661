"""Crash-to-verdict latency: the harness beside SGLang's own test habit, on the same crashing request.

Usage: python benchmarks/bench_crash_verdict.py [--runs 20] [--habit-runs 20] [--out FILE]

Each trial starts the CPU reference server at `pre-fix` on the eager draft path (the case `tokens=276,
path=eager` of scenarios/frozen_kv_mtp/long_prompt_stale_out_cache_loc.yaml) and sends the one 276-token
request that makes its scheduler raise `RuntimeError: output with shape [1] doesn't match the broadcast
shape [276]`. Harness and habit trials alternate, each on a fresh server.

What is measured, all on this machine's wall clock (`time.time()`):

* crash written: a side thread polls the server log's size every `--probe-interval-ms` (default 1 ms) and
  reads what was appended; the line was written after the last poll that did not see it and no later than
  the first poll that did, nor later than the verdict (both sides' verdicts follow the write: the harness
  reads the same line, the habit sees the process the line came from die). The write time is the middle of
  that bracket and its width is reported as `write_bracket_ms`: on a loaded machine the probe thread can be
  scheduled late, after the verdict, so the first poll alone is no bound (it once gave -0.03 ms). The line's
  own timestamp has 1 s resolution and the file's mtime moves with every later line, so neither is used.
* harness verdict: the workload client (`harness.workload.driver`) runs with `should_abort=server.failure` while
  `ServerProcess` feeds each log line to the catalogue's stream matcher; the verdict is in hand when the
  workload has returned and the crash match is known, exactly as `harness.pipeline` decides it (it waits up to
  0.3 s for the matcher when a request failed first). Also reported: when the watcher noticed the line
  (`ServerProcess.died_at`).
* habit verdict: what `sglang.test.test_utils` users do: one request with a request timeout, and a
  `/health_generate` poll every 10 s (upstream polls at that interval during launch; polling during the
  test too is generous to the habit). Death is noticed at the earlier of the request failing or a poll
  failing. The habit sees a dropped connection or a timeout, never which crash it was.
"""

from __future__ import annotations

import argparse
import http.client
import json
import threading
import time
import urllib.error
import urllib.request
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from _common import SERVER_LABEL, emit, quiet_logging, ratio, start_sim, summary

from harness.signatures.catalogue import Catalogue
from harness.workload.driver import request_body, run_workload_sync
from harness.workload.prompts import random_id_prompts

__all__ = ["main", "run_benchmark"]

CRASH_MARKER = b"doesn't match the broadcast shape"
PROMPT_TOKENS = 276
PROMPT_SEED = 28264  # the scenario's workload.prompt.seed
MAX_NEW_TOKENS = 32
SERVER_STARTUP_S = 180.0


class LogWriteProbe:
    """Notes when a marker first appears in a growing file, by polling its size in a tight loop."""

    def __init__(self, path: Path, marker: bytes, interval_s: float) -> None:
        self.path, self.marker, self.interval_s = path, marker, interval_s
        self.seen_at: float | None = None
        self.previous_poll_at: float | None = None  # the write happened after this poll
        self._stop = threading.Event()
        self._watching = threading.Event()
        self._thread = threading.Thread(target=self._run, name="log-write-probe", daemon=True)

    def __enter__(self) -> LogWriteProbe:
        self._thread.start()
        self._watching.wait(5)  # the file's end is found before the request can make the server write
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def _run(self) -> None:
        with open(self.path, "rb") as f:
            before = time.time()
            f.seek(0, 2)  # only what is written from now on
            self.previous_poll_at = before
            self._watching.set()
            tail = b""
            while not self._stop.is_set():
                # A read that misses the line began before it was written; one that has it ended after.
                before = time.time()
                chunk = f.read()
                if chunk:
                    tail = (tail + chunk)[-(len(chunk) + len(self.marker)):]
                    if self.marker in tail:
                        self.seen_at = time.time()
                        return
                self.previous_poll_at = before
                time.sleep(self.interval_s)


@dataclass(frozen=True)
class Trial:
    side: str  # "harness" or "habit"
    index: int
    crash_written_after: float | None  # the last poll that had not seen the line
    crash_seen_at: float | None  # the first poll that had
    verdict_at: float | None
    noticed_at: float | None  # harness: the log watcher marked the server dead
    noticed_by: str  # harness: "abort" | "request-failed-then-watcher"; habit: "request" | "health" | "none"
    signature: str | None
    detail: str

    @property
    def write_bracket(self) -> tuple[float, float] | None:
        """When the crash line was written, as (no earlier than, no later than)."""
        if self.crash_written_after is None or self.crash_seen_at is None:
            return None
        latest = self.crash_seen_at if self.verdict_at is None else min(self.crash_seen_at, self.verdict_at)
        return self.crash_written_after, latest

    @property
    def crash_written_at(self) -> float | None:
        bracket = self.write_bracket
        return None if bracket is None else (bracket[0] + bracket[1]) / 2

    @property
    def latency_s(self) -> float | None:
        if self.crash_written_at is None or self.verdict_at is None:
            return None
        return self.verdict_at - self.crash_written_at


def _prompt() -> Any:
    return random_id_prompts([PROMPT_TOKENS], seed=PROMPT_SEED)[0]


def harness_trial(index: int, work: Path, probe_interval_s: float, request_timeout_s: float) -> Trial:
    """One fresh server, the crashing request through the harness's client and live matcher."""
    matcher = Catalogue.load().stream()
    with ExitStack() as stack:
        server = start_sim(stack, "pre-fix", "eager", work / f"harness-{index}.log", on_line=matcher.feed,
                           startup_timeout_s=SERVER_STARTUP_S)
        with LogWriteProbe(server.log_path, CRASH_MARKER, probe_interval_s) as probe:
            result = run_workload_sync(
                server.url, [_prompt()], concurrency=1, request_rate=None, max_new_tokens=MAX_NEW_TOKENS,
                ignore_eos=True, temperature=0.0, stream=True, warmup=0, request_timeout_s=request_timeout_s,
                jsonl_path=None, should_abort=server.failure, progress=False,
            )
            # As harness.pipeline.drive: a crash line can trail the failed request; give the watcher 0.3 s.
            server.died.wait(0.3 if any(not r.ok for r in result.records) else 0.0)
            verdict_at = time.time()
            match = server.crash_match
            time.sleep(max(0.0, 3 * probe_interval_s))  # let the probe catch a line written just now
        signature = match.signature.id if match is not None else None
        by = "abort" if result.aborted else "request-failed-then-watcher"
        detail = result.aborted or (result.records[0].error if result.records else "no request recorded") or ""
        return Trial("harness", index, probe.previous_poll_at, probe.seen_at, verdict_at,
                     server.died_at, by, signature, detail[:200])


def _habit_request(url: str, body: dict[str, Any], timeout_s: float) -> str | None:
    """The habit's one request: None when it completed, else why it failed."""
    req = urllib.request.Request(url + "/generate", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=timeout_s) as resp:
            data = resp.read()
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        return f"{type(exc).__name__}: {exc}"[:200]
    if b"[DONE]" not in data:
        return "stream ended before [DONE]"
    return None


def _health_ok(url: str, timeout_s: float) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url + "/health_generate", timeout=timeout_s) as resp:
            return resp.status == 200
    except (urllib.error.URLError, http.client.HTTPException, OSError):
        return False


def habit_trial(
    index: int, work: Path, probe_interval_s: float, request_timeout_s: float, health_interval_s: float,
) -> Trial:
    """One fresh server, the same request sent the way upstream's test utilities would notice a death."""
    with ExitStack() as stack:
        server = start_sim(stack, "pre-fix", "eager", work / f"habit-{index}.log", startup_timeout_s=SERVER_STARTUP_S)
        noticed = threading.Event()
        found: dict[str, Any] = {}
        stop = threading.Event()

        def note(by: str, detail: str) -> None:
            if not noticed.is_set():
                found.update(at=time.time(), by=by, detail=detail)
                noticed.set()

        def requester() -> None:
            body = request_body(_prompt(), max_new_tokens=MAX_NEW_TOKENS, ignore_eos=True, temperature=0.0,
                                stream=True)
            error = _habit_request(server.url, body, request_timeout_s)
            if error is not None:
                note("request", error)

        def poller() -> None:
            while not stop.wait(health_interval_s):
                if not _health_ok(server.url, timeout_s=health_interval_s):
                    note("health", "/health_generate failed")
                    return

        with LogWriteProbe(server.log_path, CRASH_MARKER, probe_interval_s) as probe:
            threads = [threading.Thread(target=t, daemon=True) for t in (requester, poller)]
            for t in threads:
                t.start()
            noticed.wait(request_timeout_s + 2 * health_interval_s + 5)
            stop.set()
            time.sleep(max(0.0, 3 * probe_interval_s))
        for t in threads:
            t.join(timeout=request_timeout_s + 5)
        return Trial("habit", index, probe.previous_poll_at, probe.seen_at, found.get("at"), None, found.get("by", "none"), None,
                     found.get("detail", "death not noticed within the bound"))


def _side_summary(trials: list[Trial]) -> dict[str, Any]:
    lat = [t.latency_s for t in trials if t.latency_s is not None]
    named = [t for t in trials if t.signature]
    out: dict[str, Any] = {
        "crash_to_verdict_ms": summary(lat),
        "runs": len(trials),
        # A trial is unmeasured when the probe never saw the crash line (the server died of something else)
        # or the side reached no verdict within its bound; its raw times are still in "trials".
        "runs_unmeasured": len(trials) - len(lat),
        "signature_identified": "yes" if trials and len(named) == len(trials) else
        ("no" if not named else f"{len(named)} of {len(trials)}"),
        "signatures": sorted({t.signature for t in named}),
        "noticed_by": {k: sum(1 for t in trials if t.noticed_by == k) for k in sorted({t.noticed_by for t in trials})},
    }
    brackets = [b[1] - b[0] for t in trials if (b := t.write_bracket) is not None]
    if brackets:
        out["write_bracket_ms"] = summary(brackets)
    notice = [t.noticed_at - t.crash_written_at for t in trials if t.noticed_at and t.crash_written_at]
    if notice:
        out["crash_to_watcher_notice_ms"] = summary(notice)
    return out


def run_benchmark(
    runs: int, habit_runs: int, work: Path, *, probe_interval_s: float = 0.001, request_timeout_s: float = 60.0,
    health_interval_s: float = 10.0,
) -> dict[str, Any]:
    """Alternate harness and habit trials; return the JSON-ready summary with every trial's raw times."""
    work.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    harness_trials: list[Trial] = []
    habit_trials: list[Trial] = []
    for i in range(max(runs, habit_runs)):
        if i < runs:
            harness_trials.append(harness_trial(i, work, probe_interval_s, request_timeout_s))
        if i < habit_runs:
            habit_trials.append(habit_trial(i, work, probe_interval_s, request_timeout_s, health_interval_s))
    h, s = _side_summary(harness_trials), _side_summary(habit_trials)
    return {
        "benchmark": "crash_to_verdict",
        "server": SERVER_LABEL,
        "case": {"scenario": "scenarios/frozen_kv_mtp/long_prompt_stale_out_cache_loc.yaml",
                 "values": "tokens=276,path=eager", "build": "sim:pre-fix"},
        "method": {
            "crash_written": f"log size polled every {probe_interval_s * 1000:g} ms; the middle of the bracket from the "
                             "last poll without the line to the first poll with it or the verdict, if earlier",
            "harness_verdict": "workload returned and the crash signature match is known (as harness.pipeline)",
            "habit_verdict": f"earlier of: the request failing (timeout {request_timeout_s:g} s) or a "
                             f"/health_generate poll failing (every {health_interval_s:g} s)",
        },
        "harness": h,
        "habit": {**s, "request_timeout_s": request_timeout_s, "health_interval_s": health_interval_s},
        "ratio_habit_over_harness": {
            "p50": ratio(s["crash_to_verdict_ms"]["p50"], h["crash_to_verdict_ms"]["p50"]),
            "p95": ratio(s["crash_to_verdict_ms"]["p95"], h["crash_to_verdict_ms"]["p95"]),
        },
        "wall_s": round(time.monotonic() - began, 1),
        "trials": [{**asdict(t), "crash_written_at": t.crash_written_at,
                    "latency_ms": None if t.latency_s is None else round(t.latency_s * 1000, 3)}
                   for t in harness_trials + habit_trials],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="harness trials (default 20)")
    parser.add_argument("--habit-runs", type=int, default=20, help="habit trials (default 20)")
    parser.add_argument("--request-timeout-s", type=float, default=60.0, help="the habit's request timeout")
    parser.add_argument("--health-interval-s", type=float, default=10.0, help="the habit's health poll interval")
    parser.add_argument("--probe-interval-ms", type=float, default=1.0, help="log-size poll for the write time")
    parser.add_argument("--work", type=Path, default=Path("reports/benchmarks/crash_verdict"),
                        help="folder for the server logs")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON summary here")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.habit_runs < 0:
        parser.error("--runs must be >= 1 and --habit-runs >= 0")
    quiet_logging(args.verbose)
    result = run_benchmark(args.runs, args.habit_runs, args.work, probe_interval_s=args.probe_interval_ms / 1000,
                           request_timeout_s=args.request_timeout_s, health_interval_s=args.health_interval_s)
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
