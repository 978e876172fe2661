"""The cyclic garbage collector paused over work that builds many objects and keeps them, none in a cycle.

Each of the collector's passes walks every tracked object still alive, so a pass grows with what has been
built: over a year of dashboard points (millions of tuples and dicts) the passes were a third of the
build, and over 600 scenario files (their node trees, data and models kept for the command's answer) a
quarter of ``validate``. Reference counting still frees everything as before; what a pause leaves in a
cycle is collected by the first pass after it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off for the block (left as it was found: nested pauses do not re-enable it)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
