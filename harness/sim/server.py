"""``python -m harness.sim.server [SGLang flags] [--sim-* knobs]``: the CPU reference server's front process.

Like SGLang: parse flags (unknown ones exit 2), start the scheduler child and wait until it has
loaded the model, open the HTTP port (``/health`` answers 503 meanwhile), send SGLang's own warm-up
request (``harness.sim.warmup``; skipped with ``--skip-server-warmup``), then log
``The server is fired up and ready to roll!``.
If the scheduler fails at any point the front SIGKILLs its tree and itself as SGLang's SIGQUIT handlers do
(wait status -9) and leaves no process behind.
This is sglang-repro's model of SGLang, not SGLang.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import multiprocessing as mp
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from harness.sim import SIM_LABEL, version_string
from harness.sim.cli_args import parse_server_args
from harness.sim.model_config import ModelNotFoundError
from harness.sim.process_tree import kill_process_tree_and_self
from harness.sim.scheduler_entry import scheduler_main
from harness.sim.server_settings import SchedulerSettings, SettingsError, health_settings, resolve_settings
from harness.sim.sglang_words import CHILD_FAILED_LINE, READY_LINE, UVICORN_RUNNING, WARMUP_FAILED_LINE
from harness.sim.sim_logging import configure_logging
from harness.sim.warmup import warmup_request

if TYPE_CHECKING:
    from harness.sim.http_api import ApiState
    from harness.sim.scheduler_client import SchedulerClient

# The HTTP stack (aiohttp, asyncio, the API) is imported only once the scheduler child is started:
# the child re-imports this module (spawn), and the front loads aiohttp while the child loads torch.
_HTTP_STACK = ("harness.sim.scheduler_client", "harness.sim.http_api")

__all__ = ["main", "READY_LINE"]

logger = logging.getLogger("harness.sim.server")

_SCHEDULER_START_TIMEOUT_S = 300.0
_WARMUP_TIMEOUT_S = 600.0  # SGLang's, with SGLANG_WARMUP_TIMEOUT unset


def _start_scheduler(settings: SchedulerSettings) -> SchedulerClient:
    ctx = mp.get_context("spawn")
    inbox_r, inbox_w = ctx.Pipe(duplex=False)
    out_r, out_w = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=scheduler_main, args=(settings, inbox_r, out_w, os.getpid()),
                       name="sglang::scheduler_TP0", daemon=True)
    proc.start()
    inbox_r.close()
    out_w.close()  # so that the scheduler's death reads as EOF here
    for module in _HTTP_STACK:  # while the child imports torch
        importlib.import_module(module)
    from harness.sim.scheduler_client import SchedulerClient

    deadline = time.monotonic() + _SCHEDULER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            if out_r.poll(0.2):
                msg = out_r.recv()
                if msg[0] == "ready":
                    return SchedulerClient(proc, inbox_w, out_r)
                break  # "error": the traceback is already logged by the scheduler
        except (EOFError, OSError):
            break
        if not proc.is_alive():
            break
    else:
        logger.error("%s the scheduler was not ready within %.0f s", SIM_LABEL, _SCHEDULER_START_TIMEOUT_S)
    proc.join(2.0)
    if proc.is_alive():
        proc.kill()
        proc.join(2.0)
    logger.error("%s", CHILD_FAILED_LINE)  # SGLang's launch-phase SIGQUIT handler (harness.contract.facts)
    logger.error("%s Scheduler process exited with code %s during start-up. Shutting down.", SIM_LABEL, proc.exitcode)
    kill_process_tree_and_self()  # as that handler does: the wait status is -9 (CHILD_FAILED_SELF_KILL)


async def _warm_up(state: ApiState) -> bool:
    """SGLang's warm-up request (harness.sim.warmup); False after logging SGLang's failure line.
    A scheduler crash on the way takes the whole server down (SchedulerClient), before the ready line."""
    from harness.sim.http_api import InternalRequestFailed, run_internal_request

    request = warmup_request(state.settings.target)
    logger.info("%s warm-up request (as SGLang's _execute_server_warmup): POST %s, %s, %d prompt tokens, "
                "max_new_tokens=%d", SIM_LABEL, request.path, request.kind, len(request.input_ids),
                request.max_new_tokens)
    try:
        await run_internal_request(state, list(request.input_ids), timeout=_WARMUP_TIMEOUT_S,
                                   max_new_tokens=request.max_new_tokens)
    except (TimeoutError, InternalRequestFailed) as exc:
        logger.error("%s %s: %s %s", WARMUP_FAILED_LINE, type(exc).__name__, exc, SIM_LABEL)
        return False
    logger.info('%s warm-up request done: "POST %s HTTP/1.1" 200 OK', SIM_LABEL, request.path)
    return True


async def _serve(args: argparse.Namespace, settings: SchedulerSettings, client: SchedulerClient,
                 health: tuple[bool, float]) -> int:
    import asyncio

    from aiohttp import web

    from harness.sim.http_api import ApiState, build_app
    from harness.sim.sigterm import SigtermWatchdog

    loop = asyncio.get_running_loop()
    client.start(loop)
    state = ApiState(args, settings, client, health_generation=health[0], health_timeout_s=health[1])
    # handler_cancellation: a client that goes away cancels its handler, which aborts the request (SGLang's
    # handler checks is_disconnected() and aborts), so a SIGTERM's drain is not held up by a gone client.
    runner = web.AppRunner(build_app(state), access_log=None, handle_signals=False, handler_cancellation=True)
    await runner.setup()
    stop = asyncio.Event()
    watchdog = SigtermWatchdog(client, settings.rules)  # how it ends follows --sim-rules
    watching = loop.create_task(watchdog.run())  # ends the process itself (harness.sim.sigterm)

    def on_sigterm() -> None:
        # SGLang's tokenizer manager takes SIGTERM over at its first request; before it, uvicorn's handler stops.
        (watchdog.on_sigterm if client.running_phase else stop.set)()

    loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    try:
        try:
            await web.TCPSite(runner, args.host, args.port).start()
        except OSError as exc:
            logger.error("%s cannot bind %s:%d: %s", SIM_LABEL, args.host, args.port, exc)
            return 1
        logger.info("%s http://%s:%d (Press CTRL+C to quit) %s", UVICORN_RUNNING, args.host, args.port, SIM_LABEL)
        if not args.skip_server_warmup and not await _warm_up(state):
            return 1
        state.up = True
        logger.info(READY_LINE)
        await stop.wait()
        logger.info("%s received a stop signal; shutting down", SIM_LABEL)
        return 0
    finally:
        watching.cancel()
        client.shutdown()
        await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_server_args(argv)  # exits 2 on unknown flags, like SGLang's parser
    configure_logging(args.log_level)
    logger.info("%s %s", SIM_LABEL, version_string(args.sim_revision))
    logger.info("server_args=ServerArgs(%s)", ", ".join(f"{k}={v!r}" for k, v in sorted(vars(args).items())))
    try:
        settings = resolve_settings(args)
        health = health_settings(dict(os.environ))
    except (SettingsError, ModelNotFoundError, ValueError) as exc:
        logger.error("%s", exc)
        return 1
    client = _start_scheduler(settings)
    import asyncio

    return asyncio.run(_serve(args, settings, client, health))


if __name__ == "__main__":
    sys.exit(main())
