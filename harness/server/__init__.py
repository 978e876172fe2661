"""A server process from start to verified-clean teardown: launch, leases, GPUs, reaping, its HTTP."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.util.face import lazy_face

if TYPE_CHECKING:  # the face's names; each module is imported when one of its names is first used
    from harness.server.auth import admin_headers, request_headers
    from harness.server.hardware import Gpu, cpu_model, injected_inventory, inventory
    from harness.server.http import get_json, post
    from harness.server.lease import DEFAULT_GPU_LEASE_TIMEOUT_S, gpu_env, lease_gpus, lease_port
    from harness.server.pool import LiveServer, ServerPool, pool_key
    from harness.server.process import ServerDied, ServerProcess, StartupTimeout
    from harness.server.reaper import kill_run, read_watch_pipe

__all__ = ["DEFAULT_GPU_LEASE_TIMEOUT_S", "Gpu", "LiveServer", "ServerDied", "ServerPool", "ServerProcess", "StartupTimeout",
           "admin_headers", "cpu_model", "get_json", "gpu_env", "injected_inventory", "inventory", "kill_run", "lease_gpus",
           "lease_port", "pool_key", "post", "read_watch_pipe", "request_headers"]
__getattr__ = lazy_face(__name__)
