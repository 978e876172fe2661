"""Test server: optionally prints the ready line, then after --crash-after s logs a traceback and hangs.

It does not exit after the traceback (like a server whose scheduler died but whose HTTP front end lives on),
so the harness can only notice the crash from the log line. The line before the traceback carries the
wall-clock time it was written, for latency measurements.
"""

from __future__ import annotations

import argparse
import time

READY_LINE = "The server is fired up and ready to roll!"

TRACEBACK = """Traceback (most recent call last):
  File "/srv/test/scheduler.py", line 12, in event_loop
    self.run_batch()
RuntimeError: test server crashed on purpose"""

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--ready", action="store_true", help="print the ready line first")
    parser.add_argument("--crash-after", type=float, default=0.3)
    args = parser.parse_args()
    print("starting (test server)", flush=True)
    if args.ready:
        print(READY_LINE, flush=True)
    time.sleep(args.crash_after)
    for i in range(20):
        print(f"decode batch {i} ok", flush=True)
    print(f"CRASH_AT {time.time():.6f}", flush=True)
    print(TRACEBACK, flush=True)
    time.sleep(120)
