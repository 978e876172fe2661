"""Cross-process leases on ports and GPUs, so parallel runs of the harness never share either.

A lease is a file lock (``flock``) held for the lease's lifetime under one directory:
``$SGLANG_REPRO_LOCK_DIR``, else ``$XDG_RUNTIME_DIR/sglang-repro-locks``, else ``/tmp/sglang-repro-locks``.
The kernel drops the lock when the holder dies, so a crashed harness never leaves a stale lease.

The directory holds a bounded set of files: a port's lease is a lock on one of :data:`PORT_SLOTS` slot
files (``port-slot-<port % PORT_SLOTS>.lock``), a GPU's on ``gpu-<index>.lock``. One file per port would
leave a file for every port ever leased (hundreds after a few hundred runs); deleting a lock file on
release instead races with a waiter that has it open. Two ports that share a slot cannot be leased at
the same time, which only makes a harness try its next candidate port.

GPU sets are taken all-or-nothing: a waiter tries every GPU without blocking and, if it cannot get
``count``, lets go of what it got before sleeping. Nobody waits while holding a partial set, so no two
waiters can deadlock.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import filelock

from harness.util.errors import InfraError, UserError

# How long a run waits for GPUs that other runs hold before it ends as infra.
DEFAULT_GPU_LEASE_TIMEOUT_S = 1800.0

__all__ = [
    "DEFAULT_GPU_LEASE_TIMEOUT_S", "PORT_SLOTS", "SGLANG_HIGHEST_PORT", "GpuLease", "PortLease", "cuda_visible_devices",
    "gpu_env", "lease_gpus", "lease_port", "lock_dir", "port_is_free",
]

log = logging.getLogger(__name__)

_PORT_ATTEMPTS = 200
PORT_SLOTS = 256  # far above the servers one host runs at once


def lock_dir() -> Path:
    """Where lease files live (created on first use)."""
    override = os.environ.get("SGLANG_REPRO_LOCK_DIR")
    if override:
        path = Path(override)
    elif os.environ.get("XDG_RUNTIME_DIR"):
        path = Path(os.environ["XDG_RUNTIME_DIR"]) / "sglang-repro-locks"
    else:
        path = Path("/tmp/sglang-repro-locks")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InfraError(f"cannot create lock directory {path}: {exc.strerror}; set SGLANG_REPRO_LOCK_DIR") from None
    return path


def _try_lock(path: Path) -> filelock.BaseFileLock | None:
    # mode 0o666 so harnesses of different users on one host can share the directory.
    lock = filelock.FileLock(path, timeout=0, mode=0o666, thread_local=False, preserve_lock_file=True)
    try:
        lock.acquire()
    except filelock.Timeout:
        return None
    except OSError as exc:
        raise InfraError(f"cannot take lock {path}: {exc.strerror or exc}; set SGLANG_REPRO_LOCK_DIR") from None
    return lock


class _Lease:
    def __init__(self, locks: Sequence[filelock.BaseFileLock]) -> None:
        self._locks = list(locks)

    @property
    def held(self) -> bool:
        return bool(self._locks)

    def release(self) -> None:
        """Give the lease back (idempotent)."""
        while self._locks:
            self._locks.pop().release()

    def __enter__(self):
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


class PortLease(_Lease):
    """A TCP port no other harness process will hand out while this lease is held."""

    def __init__(self, host: str, port: int, lock: filelock.BaseFileLock) -> None:
        super().__init__([lock])
        self.host = host
        self.port = port

    def __repr__(self) -> str:
        return f"PortLease({self.host}:{self.port}, held={self.held})"


def _family(host: str) -> socket.AddressFamily:
    """The address family a server binding ``host`` uses; InfraError when the name does not resolve."""
    if ":" in host:
        return socket.AF_INET6
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise InfraError(f"server host {host!r} does not resolve on this machine: {exc}") from None
    return infos[0][0] if infos else socket.AF_INET


def port_is_free(host: str, port: int) -> bool:
    """Whether a server could bind ``host:port`` now (with SO_REUSEADDR, as servers do, so TIME_WAIT is free)."""
    with socket.socket(_family(host), socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _os_port(host: str) -> int:
    with socket.socket(_family(host), socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, 0))
        except OSError as exc:  # e.g. an address of another machine: nothing here can serve on it
            raise InfraError(f"cannot bind server host {host!r} on this machine: {exc.strerror or exc}") from None
        return int(sock.getsockname()[1])


# Real SGLang 0.5.14 and 0.5.15 derive a gRPC port from the HTTP one (port + 10000) and refuse to start when it passes
# 65535, gRPC enabled or not: "ValueError: SGLANG_GRPC_PORT (67535) must be between 1 and 65535" (srt/server_args.py
# 0.5.14:2761-2769, 0.5.15:2997-3005; 0.5.21 has neither). An OS-suggested port above this (about one in
# five of the ephemeral range) would end a real run at start-up, crashed, for nothing about the build.
SGLANG_HIGHEST_PORT = 65535 - 10000


def lease_port(host: str = "127.0.0.1", *, start: int | None = None, highest: int = 65535) -> PortLease:
    """Lease a port that is bindable now and not leased by another harness process.

    With ``start`` the ports from ``start`` upward are tried in order; without it the OS suggests them. A port
    above ``highest`` is never leased (:data:`SGLANG_HIGHEST_PORT` for real SGLang).
    """
    if start is not None and not 1 <= start <= 65535:
        raise UserError(f"port {start} is out of range 1-65535")
    directory = lock_dir()
    for attempt in range(_PORT_ATTEMPTS):
        port = _os_port(host) if start is None else start + attempt
        if port > 65535 or (start is not None and port > highest):
            break
        if port > highest:
            continue
        lock = _try_lock(directory / f"port-slot-{port % PORT_SLOTS}.lock")
        if lock is None:
            continue
        # Check after locking: a lease holder's server may already be bound, or a foreign process may be.
        if port_is_free(host, port):
            return PortLease(host, port, lock)
        lock.release()
    where = f"from {start}" if start is not None else "suggested by the OS"
    raise InfraError(f"no free port on {host} {where} after {_PORT_ATTEMPTS} tries (a port leased by a run on "
                     f"this host also blocks the others of its slot, one of {PORT_SLOTS}; lock dir {directory})")


class GpuLease(_Lease):
    """Exclusive use of ``indices`` among harness processes on this host."""

    def __init__(self, indices: Sequence[int], locks: Sequence[filelock.BaseFileLock]) -> None:
        super().__init__(locks)
        self.indices = tuple(indices)

    @property
    def env(self) -> dict[str, str]:
        return gpu_env(self.indices)

    def __repr__(self) -> str:
        return f"GpuLease({list(self.indices)}, held={self.held})"


def cuda_visible_devices(indices: Sequence[int]) -> str:
    return ",".join(str(i) for i in indices)


def gpu_env(indices: Sequence[int]) -> dict[str, str]:
    """Environment entries that give a server exactly these GPUs (NVML indices, so PCI bus order)."""
    return {"CUDA_VISIBLE_DEVICES": cuda_visible_devices(indices), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def _take_set(directory: Path, count: int, inventory: Sequence[int]) -> GpuLease | None:
    taken: list[tuple[int, filelock.BaseFileLock]] = []
    for index in inventory:
        lock = _try_lock(directory / f"gpu-{index}.lock")
        if lock is not None:
            taken.append((index, lock))
            if len(taken) == count:
                return GpuLease([i for i, _ in taken], [lk for _, lk in taken])
    for _, lock in taken:
        lock.release()
    return None


def lease_gpus(count: int, inventory: Sequence[int], *, timeout_s: float, poll_s: float = 0.2) -> GpuLease:
    """Wait up to ``timeout_s`` until ``count`` GPUs of ``inventory`` are free, and lease them."""
    pool = list(dict.fromkeys(inventory))
    if count < 1:
        raise UserError(f"GPU count must be at least 1, got {count}")
    if count > len(pool):
        raise InfraError(f"needs {count} GPUs, this host offers {len(pool)} ({cuda_visible_devices(pool) or 'none'})")
    directory = lock_dir()
    deadline = time.monotonic() + timeout_s
    waited = False
    while True:
        lease = _take_set(directory, count, pool)
        if lease is not None:
            if waited:
                log.info("leased GPUs %s after waiting", list(lease.indices))
            return lease
        if time.monotonic() >= deadline:
            raise InfraError(
                f"timed out after {timeout_s:g} s waiting for {count} free GPUs of "
                f"[{cuda_visible_devices(pool)}]; other runs hold them (lock dir {directory})"
            )
        waited = True
        # Jitter so that waiters do not retry in lockstep and keep splitting the free GPUs between them.
        time.sleep(min(poll_s * random.uniform(0.5, 1.5), max(0.0, deadline - time.monotonic())))
