"""A page in real headless Chromium over the DevTools protocol (``--remote-debugging-pipe``).

Reports every request the page made, every console message and uncaught exception, a number the
page computes, and a screenshot: what "no console error and no network request" needs, measured
in the browser rather than guessed from the HTML.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["PageVisit", "visit"]


@dataclass
class PageVisit:
    requests: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)  # "level: text"
    exceptions: list[str] = field(default_factory=list)
    value: Any = None


class _Pipe:
    def __init__(self, write_fd: int, read_fd: int) -> None:
        self.w, self.r, self.buf, self.next_id = write_fd, read_fd, b"", 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> int:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        return self.next_id

    def pump(self, timeout_s: float) -> None:
        ready, _, _ = select.select([self.r], [], [], timeout_s)
        if ready:
            chunk = os.read(self.r, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self.buf += chunk
            *msgs, self.buf = self.buf.split(b"\0")
            self.events += [json.loads(m) for m in msgs if m]

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout_s: float = 30.0) -> dict[str, Any]:
        want = self.send(method, params, session)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for ev in self.events:
                if ev.get("id") == want:
                    self.events.remove(ev)
                    if "error" in ev:
                        raise RuntimeError(f"{method}: {ev['error']}")
                    return ev.get("result", {})
            self.pump(0.2)
        raise TimeoutError(f"{method}: no answer in {timeout_s} s")


def visit(url: str, *, evaluate: str, screenshot: Path | None = None, settle_s: float = 3.0,
          timeout_s: float = 60.0, window: tuple[int, int] = (1280, 1600)) -> PageVisit:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise FileNotFoundError("chromium")
    to_chrome_r, to_chrome_w = os.pipe()
    from_chrome_r, from_chrome_w = os.pipe()
    high_r, high_w = os.dup(to_chrome_r), os.dup(from_chrome_w)  # never collide with 3 and 4

    def fds() -> None:
        os.dup2(high_r, 3)
        os.dup2(high_w, 4)

    proc = subprocess.Popen(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-pipe",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", f"--window-size={window[0]},{window[1]}", "about:blank"],
        preexec_fn=fds, pass_fds=(3, 4), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for fd in (to_chrome_r, from_chrome_w, high_r, high_w):
        os.close(fd)
    pipe = _Pipe(to_chrome_w, from_chrome_r)
    seen = PageVisit()
    try:
        target = pipe.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for method in ("Network.enable", "Runtime.enable", "Log.enable", "Page.enable"):
            pipe.call(method, session=session)
        pipe.call("Page.navigate", {"url": url}, session=session)
        deadline = time.monotonic() + timeout_s
        loaded_at: float | None = None
        while time.monotonic() < deadline and (loaded_at is None or time.monotonic() - loaded_at < settle_s):
            pipe.pump(0.2)
            for ev in [e for e in pipe.events if "method" in e]:
                pipe.events.remove(ev)
                m, p = ev["method"], ev.get("params", {})
                if m == "Network.requestWillBeSent":
                    seen.requests.append(p["request"]["url"])
                elif m == "Runtime.consoleAPICalled":
                    seen.console.append(f"{p['type']}: " + " ".join(str(a.get("value", a.get("description", "")))
                                                                   for a in p.get("args", [])))
                elif m == "Log.entryAdded":
                    seen.console.append(f"{p['entry']['level']}: {p['entry']['text']}")
                elif m == "Runtime.exceptionThrown":
                    seen.exceptions.append(json.dumps(p.get("exceptionDetails", {}))[:500])
                elif m == "Page.loadEventFired" and loaded_at is None:
                    loaded_at = time.monotonic()
        result = pipe.call("Runtime.evaluate", {"expression": evaluate, "returnByValue": True,
                                                "awaitPromise": True}, session=session)  # a promise: its value
        seen.value = result.get("result", {}).get("value")
        if screenshot is not None:
            shot = pipe.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True},
                             session=session)
            screenshot.write_bytes(base64.b64decode(shot["data"]))
        with contextlib.suppress(OSError):
            pipe.send("Browser.close")
    finally:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        os.close(to_chrome_w)
        os.close(from_chrome_r)
    return seen
