"""Test server: serves no HTTP at all; only prints the ready line after --delay seconds, then idles."""

from __future__ import annotations

import sys
import time

READY_LINE = "The server is fired up and ready to roll!"

if __name__ == "__main__":
    delay = float(sys.argv[1]) if len(sys.argv) > 1 else 0.2
    print("loading weights (test server, no HTTP)", flush=True)
    time.sleep(delay)
    print(READY_LINE, flush=True)
    time.sleep(120)
