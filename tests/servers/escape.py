"""Test server: leaves a grandchild that escaped the process group (setsid, re-parented), then gets ready.

The grandchild ignores SIGTERM, so only SIGKILL by the run tag removes it. Its pid goes to --pid-file.
"""

from __future__ import annotations

import argparse
import os
import signal
import time

READY_LINE = "The server is fired up and ready to roll!"

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--pid-file", required=True)
    args = parser.parse_args()
    child = os.fork()
    if child == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            with open(args.pid_file + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(args.pid_file + ".tmp", args.pid_file)
            time.sleep(120)
        os._exit(0)
    os.waitpid(child, 0)
    deadline = time.monotonic() + 10
    while not os.path.exists(args.pid_file) and time.monotonic() < deadline:
        time.sleep(0.01)
    print(READY_LINE, flush=True)
    time.sleep(120)
