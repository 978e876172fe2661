"""A stand-in for the harness: starts a ServerProcess (escape.py), reports pids as JSON, then sleeps.

The test SIGKILLs this process; the server must die by the parent-death signal and the escaped
grandchild by the reaper watchdog.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from harness.server.process import ServerProcess

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tag", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    work = Path(args.workdir)
    grandchild_file = work / "grandchild.pid"
    server = ServerProcess(
        [sys.executable, str(Path(__file__).with_name("escape.py")), "--pid-file", str(grandchild_file)],
        env=dict(os.environ),
        host="127.0.0.1",
        port=args.port,
        log_path=work / "server.log",
        run_tag=args.tag,
        startup_timeout_s=20,
        health_paths=(),
    )
    server.start()
    server.wait_ready()
    info = {"server": server.pid, "watchdog": server.watchdog_pid, "grandchild": int(grandchild_file.read_text())}
    (work / "pids.json.tmp").write_text(json.dumps(info))
    os.rename(work / "pids.json.tmp", work / "pids.json")
    time.sleep(120)
