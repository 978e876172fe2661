"""The harness's own requests to the servers it runs: loopback only, so never through a proxy.

One helper for every such request (readiness probes, server info, metrics, the reference server's
ground truth); the workload client (aiohttp) is separate and also ignores proxy variables.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

__all__ = ["HttpReply", "get", "get_json", "post"]

# Built once: an opener without proxy handling, whatever HTTP(S)_PROXY say.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class HttpReply:
    status: int
    body: bytes
    headers: dict[str, str]


def get(url: str, *, timeout_s: float, headers: dict[str, str] | None = None) -> HttpReply:
    """GET ``url``; an HTTP error status is a reply (not an exception). Raises OSError when no reply came."""
    return _send(urllib.request.Request(url, headers=headers or {}), timeout_s)


def post(url: str, *, timeout_s: float, body: bytes = b"", headers: dict[str, str] | None = None) -> HttpReply:
    """POST ``body`` to ``url``; like :func:`get`."""
    return _send(urllib.request.Request(url, data=body, headers=headers or {}, method="POST"), timeout_s)


def _send(request: urllib.request.Request, timeout_s: float) -> HttpReply:
    try:
        with _OPENER.open(request, timeout=timeout_s) as resp:
            return HttpReply(resp.status, resp.read(), dict(resp.headers.items()))
    except urllib.error.HTTPError as exc:
        body = exc.read() if exc.fp is not None else b""
        return HttpReply(exc.code, body, dict(exc.headers.items()) if exc.headers else {})


def get_json(url: str, *, timeout_s: float = 5.0, headers: dict[str, str] | None = None) -> dict[str, Any] | None:
    """A JSON object from ``url``, or None when there is no reply, an error status, or no object."""
    try:
        reply = get(url, timeout_s=timeout_s, headers=headers)
        if reply.status != 200:
            return None
        data = json.loads(reply.body)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
