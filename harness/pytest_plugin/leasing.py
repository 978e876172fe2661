"""GPU sets for items, disjoint across pytest-xdist workers (and any other harness on the host).

The lease is :func:`harness.server.lease.lease_gpus`: file locks, all-or-nothing, so an item needing four
GPUs waits (bounded) until four are free and never holds a partial set while waiting.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from harness.server.lease import lease_gpus

__all__ = ["item_gpus"]


@contextmanager
def item_gpus(count: int, pool: Sequence[int], *, timeout_s: float) -> Iterator[tuple[int, ...]]:
    """Hold ``count`` GPUs of ``pool`` for the duration of the block; () when none are needed."""
    if count < 1:
        yield ()
        return
    with lease_gpus(count, pool, timeout_s=timeout_s) as lease:
        yield lease.indices
