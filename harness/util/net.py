"""Host names and URLs: one place that knows an IPv6 literal needs brackets in a URL."""

from __future__ import annotations

__all__ = ["url_for", "url_host"]


def url_host(host: str) -> str:
    """``host`` as it goes between ``http://`` and ``:port``: an IPv6 literal in brackets, once."""
    if ":" in host and not host.startswith("["):
        return f"[{host}]"
    return host


def url_for(host: str, port: int | str, path: str = "") -> str:
    """``http://HOST:PORT/path`` with an IPv6 host bracketed (``http://[::1]:30000/health``)."""
    if path and not path.startswith("/"):
        path = "/" + path
    return f"http://{url_host(host)}:{port}{path}"
