"""Test server: accepts TCP connections on --port and never answers a byte."""

from __future__ import annotations

import socket
import sys
import time

if __name__ == "__main__":
    args = sys.argv[1:]
    # Either `hung.py PORT`, or an SGLang-style command line that names `--port PORT`.
    port = int(args[args.index("--port") + 1] if "--port" in args else args[0])
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(64)
    print(f"hung test server listening on {port}", flush=True)
    held = []
    deadline = time.monotonic() + 120
    server.settimeout(1.0)
    while time.monotonic() < deadline:
        try:
            conn, _ = server.accept()
        except TimeoutError:
            continue
        held.append(conn)  # keep it open, say nothing
