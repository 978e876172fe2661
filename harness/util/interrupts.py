"""Later signals hurry a teardown, never lose its record: SIGINT and SIGTERM counted, not raised, for a while.

The first Ctrl-C of a run raises KeyboardInterrupt and the run tears its server down and writes its record.
A second Ctrl-C about a second later used to land in that teardown or that write, and the run was lost:
exit 130, no ``result.json``, nothing in the store. Inside a :class:`Shield` a signal only counts (and
calls ``on_signal``, e.g. to SIGKILL the server group at once instead of waiting out the grace); when
the outermost shield closes, a signal it deferred is raised as KeyboardInterrupt if ``reraise``, so a
first Ctrl-C that arrives during a normal teardown still interrupts the command, after the teardown.
Shields nest: an inner one defers to the outer, which decides.

Between shields a command has windows (a pool closing its servers, the report being put together) where a
second signal used to land as a fresh KeyboardInterrupt -- printed from ``Popen.__del__``, or, once the run's
``sigterm_as_ctrl_c`` had closed, a SIGTERM that killed the process with -15 instead of its verdict. So a
command runs inside :func:`command_signals`, and once it has taken its first interrupt (:func:`taken`, called
where an interrupt is turned into a verdict; or raised by the handlers here) every later SIGINT and SIGTERM
only counts and hurries, until the command ends.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType, TracebackType
from typing import Any

__all__ = ["Shield", "command_signals", "late_signals", "sigterm_as_ctrl_c", "taken"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_active: list[Shield] = []


class _Command:
    """The signal state of the one command this process runs (None outside :func:`command_signals`)."""

    def __init__(self) -> None:
        self.interrupted = False  # the first interrupt has been taken; later signals only count
        self.late = 0  # signals that arrived after it


_command: _Command | None = None


def _count_and_hurry(signum: int, frame: FrameType | None) -> None:
    """The handler once an interrupt is under way: count the signal, hurry whatever teardown is open."""
    if _command is not None and _command.interrupted:
        _command.late += 1
    for shield in _active:  # every open shield learns of it; the outermost decides what it means
        shield.count += 1
    for shield in reversed(_active):
        if shield.on_signal is not None:
            with contextlib.suppress(Exception):  # hurrying is best effort: the teardown runs its course
                shield.on_signal()


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def taken() -> None:
    """The command has taken its first interrupt (a run turned it into its ``interrupted`` verdict, a search
    into its report): from now until the command ends, SIGINT and SIGTERM only count and hurry.

    Outside :func:`command_signals` (the harness used as a library, the pytest plugin) nothing changes."""
    if _command is None or _command.interrupted or not _main_thread():
        return
    _command.interrupted = True
    for sig in _SIGNALS:
        signal.signal(sig, _count_and_hurry)


def late_signals() -> int:
    """How many signals arrived after the command's first interrupt was taken (0 outside a command)."""
    return _command.late if _command is not None else 0


@contextlib.contextmanager
def command_signals() -> Iterator[None]:
    """The scope of one command: :func:`taken` latches only inside it, and the handlers it finds are put back
    when it ends (so an in-process caller, a test, gets its Ctrl-C back)."""
    global _command
    if not _main_thread() or _command is not None:
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    _command = _Command()
    try:
        yield
    finally:
        _command = None
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _after(previous: Any) -> Any:
    """What a handler is put back to when a scope closes: the late handler once the command is interrupted."""
    return _count_and_hurry if _command is not None and _command.interrupted else previous


class Shield:
    """Defer SIGINT/SIGTERM in the main thread while the block runs; elsewhere (a worker thread) a no-op."""

    def __init__(self, *, on_signal: Callable[[], object] | None = None, reraise: bool = True) -> None:
        self.on_signal = on_signal
        self.reraise = reraise
        self.count = 0
        self._previous: dict[int, Any] = {}
        self._installed = False

    @staticmethod
    def _handler(signum: int, frame: FrameType | None) -> None:
        _count_and_hurry(signum, frame)

    def __enter__(self) -> Shield:
        if _main_thread():
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
                signal.signal(sig, _after(previous))
            interrupted_before = _command is not None and _command.interrupted
            if self.count and self.reraise and exc_type is None and not interrupted_before:
                taken()  # this is the command's first interrupt; any later one only counts
                raise KeyboardInterrupt(f"{self.count} signal(s) during teardown")


@contextlib.contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """Inside, SIGTERM raises KeyboardInterrupt as Ctrl-C does, so a run (or a submitter) is ended by its own
    teardown and leaves a record, instead of dying on the spot. Only the main thread can take signals."""
    if not _main_thread():
        yield
        return
    import asyncio  # here, not at the top: the CLI imports this module on every start, asyncio only some commands

    def handler(signum: int, frame: FrameType | None) -> None:
        # Inside asyncio.run a KeyboardInterrupt raised here lands in whichever task runs (an aiohttp body
        # write, say), which asyncio then logs at exit as "Task exception was never retrieved" with its
        # traceback. asyncio's Runner handles Ctrl-C by cancelling its main task and raising once the loop
        # is done: take SIGTERM the same way whenever a Runner holds SIGINT.
        on_sigint = signal.getsignal(signal.SIGINT)
        taken()  # a second SIGTERM (or Ctrl-C) while this one is handled only counts and hurries
        runner = getattr(asyncio, "Runner", None)  # Python 3.11+; 3.10's asyncio.run leaves SIGINT alone
        if runner is not None and isinstance(getattr(getattr(on_sigint, "func", None), "__self__", None), runner):
            on_sigint(signum, frame)  # type: ignore[misc,operator]  # a partial of Runner._on_sigint
            return
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        # Once the command is interrupted, SIGTERM stays counted: put back, SIG_DFL would end it with -15.
        signal.signal(signal.SIGTERM, _after(previous))
