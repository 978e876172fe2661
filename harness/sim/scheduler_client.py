"""The front's side of the scheduler pipes: submit requests, route replies, die with the scheduler.

A reader thread receives the scheduler's messages and hands them to the event loop. When the
scheduler reports an exception, or its pipe closes, the front logs it as SGLang's SIGQUIT handlers do
and takes the whole process tree down, itself last (``kill_process_tree``: wait status -9, as in SGLang).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from harness.sim import SIM_LABEL
from harness.sim.process_tree import kill_process_tree_and_self
from harness.sim.sglang_words import CHILD_CRASHED_LINE, CHILD_FAILED_LINE, CHILD_FAILED_RUNNING_LINE

__all__ = ["SchedulerClient", "PendingRequest", "SchedulerGone"]

logger = logging.getLogger(__name__)


class SchedulerGone(RuntimeError):
    """The scheduler did not answer in time."""


@dataclass
class PendingRequest:
    """Replies for one request: cumulative output ids, and a queue of (meta_info, finish_reason) events."""

    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    output_ids: list[int] = field(default_factory=list)


class SchedulerClient:
    def __init__(self, proc: BaseProcess, to_scheduler: Connection, from_scheduler: Connection) -> None:
        self.proc = proc
        self._send_conn = to_scheduler
        self._recv_conn = from_scheduler
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: dict[str, PendingRequest] = {}
        self._calls: dict[int, asyncio.Future] = {}
        self._tokens = itertools.count(1)
        self._send_lock = threading.Lock()
        self.stopping = False
        self.last_receive = 0.0  # wall time of the scheduler's latest output (SGLang's last_receive_tstamp)
        # SGLang's tokenizer manager swaps in its running-phase SIGQUIT handler at its first request
        # (harness.contract.facts.CHILD_FAILED_RUNNING_LINE); before that the launch-phase one answers.
        self.running_phase = False

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        threading.Thread(target=self._reader, name="scheduler-reader", daemon=True).start()

    def _send(self, msg: tuple) -> None:
        # SGLang's tokenizer manager sends on a ZMQ PUSH socket (0.5.14 tokenizer_manager.py :382-384, its
        # abort :1666; 0.5.15 :388-390, :1689), which queues a message for a scheduler that has died rather
        # than raise: the request handler that aborts its request as the crash tears the server down logs no
        # traceback of its own, so the scheduler's stays the server log's last. The reader thread sees the
        # death and takes the tree down.
        with self._send_lock, contextlib.suppress(OSError):
            self._send_conn.send(msg)

    def submit(self, rid: str, payload: dict) -> PendingRequest:
        pending = PendingRequest()
        self._pending[rid] = pending
        self.running_phase = True
        self._send(("generate", {"rid": rid, **payload}))
        return pending

    def open_rids(self) -> list[str]:
        """The requests still waiting for the scheduler (SGLang's ``rid_to_state``), oldest first."""
        return list(self._pending)

    def release(self, rid: str) -> None:
        self._pending.pop(rid, None)

    def abort(self, rid: str) -> None:
        self._pending.pop(rid, None)
        self._send(("abort", rid))

    async def call(self, kind: str, timeout: float = 10.0) -> object:
        """A request-reply exchange (``stats``, ``flush_cache``, ``reset_stats``) bounded by ``timeout``."""
        assert self._loop is not None
        token = next(self._tokens)
        fut = self._loop.create_future()
        self._calls[token] = fut
        self._send((kind, token))
        try:
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            raise SchedulerGone(f"the scheduler did not answer {kind!r} within {timeout:.0f} s") from None
        finally:
            self._calls.pop(token, None)

    def shutdown(self, grace_s: float = 3.0) -> None:
        self.stopping = True
        self._send(("shutdown",))
        self.proc.join(grace_s)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(grace_s)

    # -- reader thread --------------------------------------------------------------------
    def _reader(self) -> None:
        assert self._loop is not None
        while True:
            try:
                msg = self._recv_conn.recv()
            except (EOFError, OSError):
                if not self.stopping:
                    self._die("the scheduler's pipe closed")
                return
            if msg[0] == "error":
                self._die("the scheduler hit an exception (traceback above)", reported=True)
                return
            self._loop.call_soon_threadsafe(self._dispatch, msg)

    def _dispatch(self, msg: tuple) -> None:
        kind = msg[0]
        if kind == "out":
            self.last_receive = time.time()
            _, rid, new_ids, meta, finish = msg
            pending = self._pending.get(rid)
            if pending is not None:
                pending.output_ids.extend(new_ids)
                pending.queue.put_nowait((meta, finish))
        elif kind in ("stats", "flush_cache", "reset_stats"):
            fut = self._calls.get(msg[1])
            if fut is not None and not fut.done():
                fut.set_result(msg[2])

    def _die(self, why: str, *, reported: bool = False) -> None:
        """``reported``: the scheduler sent its exception (SGLang's scheduler SIGQUITs its parent itself then,
        and the SIGQUIT handler stops the SubprocessWatchdog before it kills the tree: no watchdog line)."""
        # Runs on the reader thread: independent of whatever the event loop is doing.
        self.proc.join(2.0)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(2.0)
        code = self.proc.exitcode
        if code and not reported:  # SGLang's SubprocessWatchdog: a child that exits non-zero, a signal included
            logger.error("Subprocess scheduler_0 (pid=%d) crashed with exit code %s. %s", self.proc.pid, code,
                         CHILD_CRASHED_LINE)
        if self.running_phase:
            logger.error("SIGQUIT received. signum=None, frame=None. %s", CHILD_FAILED_RUNNING_LINE)
        else:
            logger.error("%s", CHILD_FAILED_LINE)
        logger.error("%s Scheduler process exited with code %s: %s. Shutting down the server and its "
                     "process tree.", SIM_LABEL, code, why)
        kill_process_tree_and_self()
