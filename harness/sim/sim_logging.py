"""Log lines in SGLang's shape (``[time TP0] message``) on stderr, for the front and the scheduler."""

from __future__ import annotations

import logging
import sys

__all__ = ["configure_logging"]


def configure_logging(level: str = "info", prefix: str = "") -> None:
    """Route the root logger to stderr with SGLang's format; ``prefix`` is e.g. ``" TP0"``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"[%(asctime)s{prefix}] %(message)s", datefmt="%Y-%m-%d %H:%M:%S"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    # aiohttp logs every request at info; SGLang's front is quiet about them.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
