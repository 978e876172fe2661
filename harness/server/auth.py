"""The credentials the harness's own requests carry to a server started with ``--api-key``.

SGLang with ``--api-key K`` answers 401 ``{"error": "Unauthorized"}`` to every request without
``Authorization: Bearer K`` except ``/health*`` and ``/metrics*``; with ``--admin-api-key A`` the
admin-optional endpoints (``/flush_cache``...) want ``A`` instead (srt/utils/auth.py
``decide_request_auth``: 0.5.14 and 0.5.15, lines 74-146; the 401 body at 186-196). The key comes from the
scenario's own flags, so the same scenario works with and without one. Headers are never written to an
artifact (``harness.util.redact.redact_headers``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["admin_headers", "request_headers"]


def _bearer(value: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"} if isinstance(value, str) and value else {}


def request_headers(args: Mapping[str, Any]) -> dict[str, str]:
    """For generation and info endpoints (SGLang's "normal" level): the API key when one is set."""
    return _bearer(args.get("api-key"))


def admin_headers(args: Mapping[str, Any]) -> dict[str, str]:
    """For admin-optional endpoints (``/flush_cache``): the admin key when set, else the API key."""
    return _bearer(args.get("admin-api-key")) or _bearer(args.get("api-key"))
