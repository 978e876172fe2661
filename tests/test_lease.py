"""Port and GPU leases across real worker processes (GPU ids injected; no GPU needed)."""

from __future__ import annotations

import itertools
import json
import multiprocessing as mp
import multiprocessing.synchronize
import os
import socket
import time
from pathlib import Path

import pytest

from harness.server.lease import cuda_visible_devices, lease_gpus, lease_port, lock_dir
from harness.util.errors import InfraError, UserError

INVENTORY = list(range(8))


@pytest.fixture(autouse=True)
def lock_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "locks"
    monkeypatch.setenv("SGLANG_REPRO_LOCK_DIR", str(directory))
    return directory


def _gpu_worker(items: mp.Queue, out_dir: str, hold_s: float) -> None:
    while True:
        item = items.get()
        if item is None:
            return
        item_id, count = item
        with lease_gpus(count, INVENTORY, timeout_s=30, poll_s=0.02) as lease:
            began = time.monotonic()
            time.sleep(hold_s)
            ended = time.monotonic()
            indices = list(lease.indices)
        # Both stamps lie inside the lease, so two records sharing a GPU must not overlap in time.
        Path(out_dir, f"{item_id}.json").write_text(
            json.dumps({"pid": os.getpid(), "count": count, "indices": indices, "start": began, "end": ended})
        )


@pytest.mark.slow
def test_gpu_leases_never_overlap_across_processes(tmp_path: Path) -> None:
    ctx = mp.get_context("fork")
    items: mp.Queue = ctx.Queue()
    wanted = {i: count for i, count in enumerate([1, 2, 4, 4, 2, 1, 4, 1, 2, 2, 4, 1, 1, 4, 2, 1] * 2)}
    for item in wanted.items():
        items.put(item)
    workers = [ctx.Process(target=_gpu_worker, args=(items, str(tmp_path), 0.04)) for _ in range(4)]
    for _ in workers:
        items.put(None)
    for worker in workers:
        worker.start()
    try:
        for worker in workers:
            worker.join(60)  # a deadlock shows up as a worker still alive here
        assert all(w.exitcode == 0 for w in workers), [w.exitcode for w in workers]
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.kill()
                worker.join(5)

    records = {int(p.stem): json.loads(p.read_text()) for p in tmp_path.glob("*.json")}
    assert set(records) == set(wanted), "every item ran"
    for item_id, rec in records.items():
        assert len(rec["indices"]) == wanted[item_id] == len(set(rec["indices"]))
        assert set(rec["indices"]) <= set(INVENTORY)
    concurrent = 0
    for a, b in itertools.combinations(records.values(), 2):
        if a["start"] < b["end"] and b["start"] < a["end"]:
            concurrent += 1
            assert not set(a["indices"]) & set(b["indices"]), f"GPU shared by overlapping leases: {a} {b}"
    assert concurrent > 0, "the workers never ran side by side, so the test proved nothing"
    assert len({r["pid"] for r in records.values()}) > 1


def test_gpu_lease_times_out_naming_what_it_waited_for() -> None:
    with lease_gpus(7, INVENTORY, timeout_s=1) as held:
        began = time.monotonic()
        with pytest.raises(InfraError, match=r"waiting for 2 free GPUs of \[0,1,2,3,4,5,6,7\]"):
            lease_gpus(2, INVENTORY, timeout_s=0.3, poll_s=0.05)
        assert 0.3 <= time.monotonic() - began < 2
        with lease_gpus(1, INVENTORY, timeout_s=1) as rest:
            assert set(rest.indices).isdisjoint(held.indices)
    assert not held.held
    with lease_gpus(8, INVENTORY, timeout_s=1) as everything:  # released means really released
        assert sorted(everything.indices) == INVENTORY


def test_gpu_lease_rejects_impossible_requests() -> None:
    with pytest.raises(InfraError, match="needs 9 GPUs, this host offers 8"):
        lease_gpus(9, INVENTORY, timeout_s=0)
    with pytest.raises(UserError):
        lease_gpus(0, INVENTORY, timeout_s=0)


def test_gpu_lease_env() -> None:
    assert cuda_visible_devices([3, 1]) == "3,1"
    assert cuda_visible_devices([]) == ""
    with lease_gpus(2, [5, 6, 7], timeout_s=1) as lease:
        assert lease.env == {"CUDA_VISIBLE_DEVICES": "5,6", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def _port_worker(out: mp.Queue, start: int | None, n: int, ready: multiprocessing.synchronize.Event,
                 release: multiprocessing.synchronize.Event) -> None:
    leases = [lease_port(start=start) for _ in range(n)]
    out.put([lease.port for lease in leases])
    ready.wait(30)
    release.wait(30)
    for lease in leases:
        lease.release()


@pytest.mark.slow
@pytest.mark.parametrize("start", [None, 43100])
def test_port_leases_from_several_processes_never_collide(start: int | None) -> None:
    ctx = mp.get_context("fork")
    out: mp.Queue = ctx.Queue()
    release = ctx.Event()
    ready = ctx.Event()
    workers = [ctx.Process(target=_port_worker, args=(out, start, 5, ready, release)) for _ in range(4)]
    for worker in workers:
        worker.start()
    try:
        ports = [p for _ in workers for p in out.get(timeout=30)]
        ready.set()
        assert len(ports) == 20 and len(set(ports)) == 20, sorted(ports)
        if start is not None:
            assert all(p >= start for p in ports)
        with lease_port(start=start) as mine:  # the parent too gets a port none of them holds
            assert mine.port not in ports
    finally:
        release.set()
        for worker in workers:
            worker.join(10)
            if worker.is_alive():
                worker.kill()
                worker.join(5)


def test_port_lease_skips_ports_in_use() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        taken = busy.getsockname()[1]
        with lease_port(start=taken) as lease:
            assert lease.port != taken and lease.port > taken
    with pytest.raises(UserError):
        lease_port(start=70000)


def test_lock_dir_override(lock_root: Path) -> None:
    assert lock_dir() == lock_root and lock_root.is_dir()


def test_lock_dir_stays_bounded_over_many_leases(lock_root: Path) -> None:
    from harness.server.lease import PORT_SLOTS

    held = [lease_port() for _ in range(64)]  # held at once: all distinct, as before
    assert len({lease.port for lease in held}) == len(held)
    for lease in held:
        lease.release()
    for attempt in range(700):  # a few hundred runs' worth, each leasing and releasing a port
        with lease_port(start=20000 + 3 * attempt) as lease:
            assert lease.held
    for _ in range(3):
        with lease_gpus(2, INVENTORY, timeout_s=5):
            pass
    files = sorted(p.name for p in lock_root.iterdir())
    assert len(files) <= PORT_SLOTS + len(INVENTORY), (len(files), files[:5])


def test_ports_sharing_a_lock_slot_are_not_leased_together() -> None:
    from harness.server.lease import PORT_SLOTS

    with lease_port(start=21000) as first:
        second = lease_port(start=first.port + PORT_SLOTS)  # same slot: taken, so the next port is tried
        try:
            assert second.port != first.port + PORT_SLOTS
            assert second.port % PORT_SLOTS != first.port % PORT_SLOTS
        finally:
            second.release()


@pytest.mark.parametrize("host", ["no-such-host.invalid", "192.0.2.1"])
def test_a_host_this_machine_cannot_serve_on_is_infra_not_a_traceback(host: str) -> None:
    with pytest.raises(InfraError, match="server host"):
        lease_port(host)


def test_ipv6_loopback_lease() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this host")
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("::1 is not configured here")
    with lease_port("::1") as lease:
        assert lease.port > 0
