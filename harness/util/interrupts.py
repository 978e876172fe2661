"""Later signals hurry a teardown, never lose its record: SIGINT and SIGTERM counted, not raised, for a while.

The first Ctrl-C of a run raises KeyboardInterrupt and the run tears its server down and writes its record.
A second Ctrl-C about a second later used to land in that teardown or that write, and the run was lost:
exit 130, no ``result.json``, nothing in the store. Inside a :class:`Shield` a signal only counts (and
calls ``on_signal``, e.g. to SIGKILL the server group at once instead of waiting out the grace); when
the outermost shield closes, a signal it deferred is raised as KeyboardInterrupt if ``reraise``, so a
first Ctrl-C that arrives during a normal teardown still interrupts the command, after the teardown.
Shields nest: an inner one defers to the outer, which decides.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType, TracebackType
from typing import Any

__all__ = ["Shield", "sigterm_as_ctrl_c"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_active: list[Shield] = []


class Shield:
    """Defer SIGINT/SIGTERM in the main thread while the block runs; elsewhere (a worker thread) a no-op."""

    def __init__(self, *, on_signal: Callable[[], None] | None = None, reraise: bool = True) -> None:
        self.on_signal = on_signal
        self.reraise = reraise
        self.count = 0
        self._previous: dict[int, Any] = {}
        self._installed = False

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        for shield in _active:  # every open shield learns of it; the outermost decides what it means
            shield.count += 1
        for shield in reversed(_active):
            if shield.on_signal is not None:
                with contextlib.suppress(Exception):  # hurrying is best effort: the teardown runs its course
                    shield.on_signal()

    def __enter__(self) -> Shield:
        if threading.current_thread() is threading.main_thread():
            if not _active:
                for sig in _SIGNALS:
                    self._previous[sig] = signal.signal(sig, self._handler)
                self._installed = True
            _active.append(self)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self not in _active:
            return
        _active.remove(self)
        if self._installed:
            for sig, previous in self._previous.items():
                signal.signal(sig, previous)
            if self.count and self.reraise and exc_type is None:
                raise KeyboardInterrupt(f"{self.count} signal(s) during teardown")


@contextlib.contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """Inside, SIGTERM raises KeyboardInterrupt as Ctrl-C does, so a run (or a submitter) is ended by its own
    teardown and leaves a record, instead of dying on the spot. Only the main thread can take signals."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        # Inside asyncio.run a KeyboardInterrupt raised here lands in whichever task runs (an aiohttp body
        # write, say), which asyncio then logs at exit as "Task exception was never retrieved" with its
        # traceback. asyncio's Runner handles Ctrl-C by cancelling its main task and raising once the loop
        # is done: take SIGTERM the same way whenever a Runner holds SIGINT.
        on_sigint = signal.getsignal(signal.SIGINT)
        runner = getattr(asyncio, "Runner", None)  # Python 3.11+; 3.10's asyncio.run leaves SIGINT alone
        if runner is not None and isinstance(getattr(getattr(on_sigint, "func", None), "__self__", None), runner):
            on_sigint(signum, frame)  # type: ignore[misc,operator]  # a partial of Runner._on_sigint
            return
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
