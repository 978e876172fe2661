"""The scheduler child's entry point and message loop, torch-free, so the front can spawn it without importing torch.

One owner for the child's life (die with the parent, log in SGLang's shape, report ready, log an exception's
traceback and exit 1) and for the pipe protocol (``generate``, ``abort``, ``stats``, ``flush_cache``,
``reset_stats``, ``shutdown``), whichever scheduler computes the tokens: the PyTorch model
(harness.sim.scheduler) or the torch-free stand-in (harness.sim.standin), chosen by ``--sim-scheduler``.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import sys
import time
import traceback
from multiprocessing.connection import Connection

from harness.sim import SIM_LABEL
from harness.sim.req_state import Req
from harness.sim.server_settings import SchedulerSettings
from harness.sim.sim_logging import configure_logging

__all__ = ["SchedulerLoop", "scheduler_main"]

logger = logging.getLogger(__name__)


class SchedulerLoop:
    """The loop both schedulers run: poll the front's messages, step while there is work, answer calls."""

    out: Connection
    stats: dict
    # What both schedulers keep, and the admission and step below read (one rule, the reference server's, for both).
    s: SchedulerSettings
    waiting: list[Req]
    running: list[Req]
    chunked_req: Req | None
    _last_finish: float | None

    def _budget(self, r: Req) -> int:
        raise NotImplementedError

    def _match(self, r: Req) -> None:
        raise NotImplementedError

    def _release(self, r: Req) -> None:
        raise NotImplementedError

    def _send(self, r: Req) -> None:
        raise NotImplementedError

    def run_prefill(self, batch: list[tuple[Req, int]]) -> None:
        raise NotImplementedError

    def run_decode(self) -> None:
        raise NotImplementedError

    def has_work(self) -> bool:
        return bool(self.waiting or self.running or self.chunked_req)

    def _admit(self) -> list[tuple[Req, int]]:
        """The next prefill batch: (request, tokens it extends now). SGLang's PrefillAdder: the chunked
        request's next chunk first (``add_chunked_req``), then waiting requests, each extending what its
        cached prefix leaves; one that does not fit the chunk budget is cut to it and becomes the chunked
        request (``add_one_req``, schedule_policy.py 0.5.14 :704-725, :986-1015)."""
        chunk = self.s.chunked_prefill_size if self.s.chunked_prefill_size > 0 else None
        batch: list[tuple[Req, int]] = []
        tokens = 0
        if self.chunked_req is not None:
            r = self.chunked_req
            left = len(r.input_ids) - r.seq_len
            take = min(left, chunk) if chunk else left
            batch.append((r, take))
            tokens += take
            if take < left:
                return batch
            self.chunked_req = None
        committed = sum(self._budget(r) for r in self.running) + sum(self._budget(r) for r, _ in batch)
        admitted: list[Req] = []
        for r in list(self.waiting):
            need = self._budget(r)
            if len(self.running) + len(batch) >= self.s.max_running_requests or committed + need > self.s.max_total_tokens:
                break
            if chunk is not None and tokens >= chunk:
                break
            if batch and tokens + len(r.input_ids) > self.s.max_prefill_tokens:
                break
            self._match(r)
            extend = len(r.input_ids) - r.seq_len
            take = min(extend, chunk - tokens) if chunk is not None else extend
            batch.append((r, take))
            admitted.append(r)
            committed += need
            tokens += take
            if take < extend:
                self.chunked_req = r
                break
        for r in admitted:
            self.waiting.remove(r)
        return batch

    def step(self) -> None:
        batch = self._admit() if (self.waiting or self.chunked_req) else []
        if batch:
            self.run_prefill(batch)
        elif self.running:
            self.run_decode()
        for r in list(self.running):
            if r.finish_reason is not None:
                self.running.remove(r)
                self._release(r)
                if r.count_in_stats:
                    self.stats["requests"] += 1
                    self._last_finish = time.monotonic()
            if len(r.output_ids) > r.sent_len or r.finish_reason is not None:
                self._send(r)

    def add_request(self, msg: dict) -> None:
        raise NotImplementedError

    def abort(self, rid: str) -> None:
        raise NotImplementedError

    def snapshot(self) -> dict[str, object]:
        raise NotImplementedError

    def flush_cache(self) -> bool:
        raise NotImplementedError

    def reset_stats(self) -> bool:
        raise NotImplementedError

    def event_loop(self, inbox: Connection, parent_pid: int) -> None:
        while True:
            if inbox.poll(0 if self.has_work() else 0.05):
                while inbox.poll(0):
                    if not self._handle(inbox.recv()):
                        return
            if os.getppid() != parent_pid:
                logger.error("%s parent process is gone; the scheduler exits", SIM_LABEL)
                return
            if self.has_work():
                t0 = time.monotonic()
                self.step()
                self.stats["busy_s"] += time.monotonic() - t0

    def _handle(self, msg: tuple) -> bool:
        kind = msg[0]
        if kind == "generate":
            self.add_request(msg[1])
        elif kind == "abort":
            self.abort(msg[1])
        elif kind == "stats":
            self.out.send(("stats", msg[1], self.snapshot()))
        elif kind == "flush_cache":
            self.out.send(("flush_cache", msg[1], self.flush_cache()))
        elif kind == "reset_stats":
            self.out.send(("reset_stats", msg[1], self.reset_stats()))
        elif kind == "shutdown":
            return False
        return True


def _die_with_parent() -> None:
    # PR_SET_PDEATHSIG (1): the kernel kills this child when the front process dies, even by SIGKILL.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


def scheduler_main(settings: SchedulerSettings, inbox: Connection, out: Connection, parent_pid: int) -> None:
    """Entry point of the scheduler child (spawned by the front)."""
    # Imported here, in the child only: the model's scheduler imports torch; the stand-in does not.
    if settings.scheduler == "standin":
        from harness.sim.standin.scheduler import StandinScheduler as scheduler_class
    else:
        from harness.sim.scheduler import Scheduler as scheduler_class  # type: ignore[assignment]
    run_scheduler_process(scheduler_class, settings, inbox, out, parent_pid)


def run_scheduler_process(scheduler_class: type, settings: SchedulerSettings, inbox: Connection, out: Connection,
                          parent_pid: int) -> None:
    """Build the scheduler, report ready, run its loop; an exception is logged with its traceback
    ("Scheduler hit an exception: ...") and the process exits 1, as SGLang's scheduler does."""
    _die_with_parent()
    if os.getppid() != parent_pid:
        sys.exit(1)
    configure_logging(settings.log_level, prefix=" TP0")
    try:
        scheduler = scheduler_class(settings, out)
        out.send(("ready", {"max_total_tokens": settings.max_total_tokens}))
        scheduler.event_loop(inbox, parent_pid)
    except Exception:
        logger.error("Scheduler hit an exception: %s", traceback.format_exc())
        with contextlib.suppress(OSError):
            out.send(("error", traceback.format_exc()))
        logging.shutdown()
        os._exit(1)
