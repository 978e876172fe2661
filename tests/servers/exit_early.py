"""Test server: logs a line and exits at once with the code given (default 7)."""

from __future__ import annotations

import sys

if __name__ == "__main__":
    print("cannot start: this test server always fails", flush=True)
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
