"""The upstream issues filed for an incident (``sglang-repro store link INCIDENT URL``), kept in ``upstream_links``.

An incident keeps every link given to it (a second issue, a pull request), each once. The nightly's messages about
the incident and the dashboard show them, so whoever reads that the incident resolved on a build knows which upstream
issue to close.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from sqlalchemy import select

from harness.store.schema import upstream_links
from harness.store.store import Store
from harness.util.clock import now_iso
from harness.util.errors import UserError

__all__ = ["add_link", "check_url", "links_by_incident"]

_HOST = re.compile(r"^[A-Za-z0-9.-]+(?::\d+)?$")


def check_url(url: str) -> str:
    """``url`` if it is an http(s) address with a host and no credentials; UserError naming what is wrong."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc or not _HOST.match(parts.netloc):
        raise UserError(f"store link: {url!r} is not an http(s) address with a host (e.g. "
                        "https://github.com/sgl-project/sglang/issues/28264)")
    return url.strip()


def add_link(store: Store, incident: str, url: str) -> bool:
    """Record ``url`` on ``incident`` (an incident fingerprint); False when it was recorded already."""
    with store._begin("cannot record the link") as conn:
        known = conn.execute(select(upstream_links.c.url).where(upstream_links.c.incident == incident)
                             .where(upstream_links.c.url == url)).first()
        if known is not None:
            return False
        conn.execute(upstream_links.insert().values(incident=incident, url=url, linked_at=now_iso()))
    return True


def links_by_incident(store: Store) -> Mapping[str, tuple[str, ...]]:
    """Incident fingerprint -> its links, oldest first."""
    out: dict[str, list[str]] = {}
    with store._begin("cannot read the links") as conn:
        for incident, url in conn.execute(select(upstream_links.c.incident, upstream_links.c.url)
                                          .order_by(upstream_links.c.linked_at, upstream_links.c.url)):
            out.setdefault(str(incident), []).append(str(url))
    return {k: tuple(v) for k, v in out.items()}
