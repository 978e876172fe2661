"""A throwaway one-node SLURM cluster for the executor tests (and for ``.ci/run``).

Real daemons, each in its own process group, all under one folder: ``munged`` (AuthType=auth/munge,
its socket in the folder), MariaDB and ``slurmdbd`` (submitit reads job states with ``sacct``, which
needs the accounting daemon), ``slurmctld`` and ``slurmd`` on 127.0.0.1 with free ports. The node has
``GPUS`` GPUs of type ``h200``: ``gres.conf`` with ``AutoDetect=off`` and ``File=`` on character devices
made with ``mknod`` (the null device's numbers), which SLURM schedules as GPUs and exposes to a job in
``CUDA_VISIBLE_DEVICES``. ``SlurmdParameters=config_overrides`` lets the node declare more CPUs and
memory than the test machine has, so several jobs can run at once.

``start(DIR, accounting=False)`` makes the other kind of small cluster (issue 37):
``AccountingStorageType=accounting_storage/none``, no MariaDB or ``slurmdbd``, ``sacct`` answering "Slurm
accounting storage is disabled", and slurm's default ``MinJobAge``. Its own folder, ports, munge socket and
cluster name, so it runs beside the accounting one (the tests use both in one pytest worker).

``python -m tests.slurm._cluster start DIR`` prints the ``SLURM_CONF`` path; ``stop DIR`` stops it.
Clients (sbatch, squeue, sacct, submitit) find the cluster through ``SLURM_CONF``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from tests.helpers import free_port

__all__ = ["CONF_ENV", "GPUS", "GPU_TYPE", "missing_binaries", "slurmdbd_down", "start", "stop"]

CONF_ENV = "SLURM_CONF"
GPUS = 4
GPU_TYPE = "h200"
CLUSTER = "repro"
CLUSTER_NO_ACCOUNTING = "repro-noacct"
NODE = "node1"
_BINARIES = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "sacct", "squeue", "scontrol", "sinfo")
_ACCOUNTING_BINARIES = ("slurmdbd", "sacctmgr", "mariadbd", "mariadb-install-db")
_DAEMONS = ("slurmd", "slurmctld", "slurmdbd", "mariadbd", "munged")  # stop order


def missing_binaries(*, accounting: bool = True) -> list[str]:
    """The binaries this cluster needs that are not installed (Debian: slurm-wlm munge, and for accounting
    slurmdbd mariadb-server)."""
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    wanted = _BINARIES + (_ACCOUNTING_BINARIES if accounting else ())
    return [b for b in wanted if shutil.which(b, path=path) is None]


def _spawn(root: Path, name: str, argv: list[str], env: dict[str, str]) -> None:
    """Start one daemon in the foreground of its own process group; its pid goes to ``root/NAME.pid``."""
    log = open(root / f"{name}.out", "ab")  # noqa: SIM115 - the daemon keeps it
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                            start_new_session=True)
    log.close()
    (root / f"{name}.pid").write_text(str(proc.pid))


def _wait_for(what: str, check: Callable[[], bool], root: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.3)
    logs = "; ".join(f"{p.name}: {p.read_text(errors='replace')[-400:]}" for p in sorted(root.glob("*.out")))
    raise RuntimeError(f"SLURM test cluster: {what} not ready after {timeout_s:.0f} s ({logs})")


def _ok(argv: list[str], env: dict[str, str]) -> bool:
    try:
        return subprocess.run(argv, env=env, capture_output=True, timeout=20).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def _write_config(root: Path, ports: dict[str, int], accounting: bool) -> None:
    host = socket.gethostname().split(".")[0]
    dev = root / "dev"
    dev.mkdir()
    for i in range(GPUS):
        os.mknod(dev / f"nvidia{i}", 0o666 | 0o020000, os.makedev(1, 3))  # a character device, as nvidiaN is
    for sub in ("state", "spool"):
        (root / sub).mkdir()
    sock = root / "munge.socket"
    if accounting:
        storage = f"""\
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={ports['dbd']}
# The munge socket of connections to slurmdbd (AuthInfo covers only the cluster's own messages).
AccountingStoragePass={sock}
MinJobAge=600
"""
    else:  # a small cluster's default: sacct has nothing to read; slurmctld forgets a job MinJobAge (300 s) after it
        storage = "AccountingStorageType=accounting_storage/none\n"
    (root / "slurm.conf").write_text(f"""\
ClusterName={CLUSTER if accounting else CLUSTER_NO_ACCOUNTING}
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ports['ctld']}
SlurmdPort={ports['slurmd']}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
StateSaveLocation={root / 'state'}
SlurmdSpoolDir={root / 'spool'}
SlurmctldPidFile={root / 'slurmctld.pidfile'}
SlurmdPidFile={root / 'slurmd.pidfile'}
SlurmctldLogFile={root / 'slurmctld.log'}
SlurmdLogFile={root / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# A job without --mem would otherwise hold the whole node's memory, and jobs could never share it.
DefMemPerCPU=1000
GresTypes=gpu
SlurmdParameters=config_overrides
{storage}JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
KillWait=5
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=60
MessageTimeout=30
NodeName={NODE} NodeAddr=127.0.0.1 NodeHostname={host} CPUs=16 RealMemory=32000 Gres=gpu:{GPU_TYPE}:{GPUS} State=UNKNOWN
PartitionName=debug Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
""")
    (root / "gres.conf").write_text(f"AutoDetect=off\nNodeName={NODE} Name=gpu Type={GPU_TYPE} "
                                    f"File={dev}/nvidia[0-{GPUS - 1}]\n")
    if not accounting:
        return
    dbd = root / "slurmdbd.conf"
    dbd.write_text(f"""\
AuthType=auth/munge
AuthInfo=socket={sock}
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={ports['dbd']}
SlurmUser=root
PidFile={root / 'slurmdbd.pidfile'}
LogFile={root / 'slurmdbd.log'}
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={ports['db']}
StorageUser=root
StorageLoc=slurm_acct_db
""")
    dbd.chmod(0o600)  # slurmdbd refuses a world-readable config (it may hold the database password)


def start(root: Path, *, timeout_s: float = 90.0, accounting: bool = True) -> str:
    """Make and start the cluster under ``root``; the path of its ``slurm.conf`` (for ``SLURM_CONF``).
    ``accounting=False``: no slurmdbd (``AccountingStorageType=accounting_storage/none``). A start that fails
    stops whatever it had started before raising."""
    missing = missing_binaries(accounting=accounting)
    if missing:
        packages = "slurm-wlm slurmdbd munge mariadb-server" if accounting else "slurm-wlm munge"
        raise RuntimeError(f"SLURM is not installed (missing {', '.join(missing)}; Debian: apt-get install "
                           f"{packages})")
    if os.geteuid() != 0:
        raise RuntimeError("the one-node SLURM cluster runs its daemons as root (mknod, SlurmUser=root)")
    root.mkdir(parents=True, exist_ok=True)
    # Daemons' paths must be short (a UNIX socket path is at most 107 bytes) and reachable by every daemon.
    home = Path(tempfile.mkdtemp(prefix="repro-slurm-"))
    home.chmod(0o755)  # munged wants its socket's folder searchable by every client
    (root / "cluster").write_text(str(home))
    try:
        return _start_daemons(home, timeout_s, accounting)
    except BaseException:  # a daemon that would not come up, or Ctrl-C: none of the others is left running
        stop(root)
        raise


def _start_daemons(home: Path, timeout_s: float, accounting: bool) -> str:
    ports = {"ctld": free_port(), "slurmd": free_port(), "dbd": free_port(), "db": free_port()}
    _write_config(home, ports, accounting)
    env = {**os.environ, CONF_ENV: str(home / "slurm.conf"), "PATH": os.environ.get("PATH", "") + ":/usr/sbin"}
    key = home / "munge.key"
    subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True, capture_output=True, timeout=30)
    key.chmod(0o600)
    _spawn(home, "munged", ["munged", "--foreground", "--force", f"--socket={home / 'munge.socket'}",
                            f"--key-file={key}", f"--pid-file={home / 'munged.pidfile'}",
                            f"--log-file={home / 'munged.log'}", f"--seed-file={home / 'munged.seed'}"], env)
    if accounting:
        _start_accounting(home, ports, env, timeout_s)
    _spawn(home, "slurmctld", ["slurmctld", "-D", "-i"], env)
    _wait_for("slurmctld", lambda: _ok(["scontrol", "ping"], env), home, timeout_s)
    _spawn(home, "slurmd", ["slurmd", "-D", "-N", NODE], env)
    _wait_for("the node", lambda: _node_idle(env), home, timeout_s)
    return str(home / "slurm.conf")


def _start_accounting(home: Path, ports: dict[str, int], env: dict[str, str], timeout_s: float) -> None:
    """MariaDB and slurmdbd, the cluster registered with them (before slurmctld, which registers itself)."""
    subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={home / 'db'}", "--user=root",
                    "--auth-root-authentication-method=normal", "--skip-test-db"],
                   check=True, capture_output=True, timeout=timeout_s)
    _spawn(home, "mariadbd", ["mariadbd", "--no-defaults", f"--datadir={home / 'db'}", "--user=root",
                              "--bind-address=127.0.0.1", f"--port={ports['db']}", f"--socket={home / 'db.sock'}",
                              "--skip-grant-tables", "--innodb-flush-log-at-trx-commit=0",
                              f"--pid-file={home / 'mariadbd.pidfile'}"], env)
    _wait_for("mariadb", lambda: _port_open(ports["db"]), home, timeout_s)
    _spawn(home, "slurmdbd", ["slurmdbd", "-D"], env)
    _wait_for("slurmdbd", lambda: _port_open(ports["dbd"]), home, timeout_s)
    _wait_for("sacctmgr", lambda: _ok(["sacctmgr", "-i", "add", "cluster", CLUSTER], env)
              or _ok(["sacctmgr", "-n", "show", "cluster", CLUSTER], env), home, timeout_s)


@contextlib.contextmanager
def slurmdbd_down(conf: str, *, timeout_s: float = 60.0) -> Iterator[None]:
    """The accounting cluster of ``conf`` without its slurmdbd for the block (slurmctld keeps what it would send
    it, sacct fails), then slurmdbd started again on its port."""
    home = Path(conf).parent
    pid = int((home / "slurmdbd.pid").read_text())
    found = re.search(r"AccountingStoragePort=(\d+)", (home / "slurm.conf").read_text())
    if found is None:
        raise RuntimeError(f"{home / 'slurm.conf'}: no AccountingStoragePort (a cluster without accounting?)")
    port = int(found.group(1))
    _signal_group(pid, signal.SIGTERM)
    _wait_for("slurmdbd to stop", lambda: not _alive(pid) and not _port_open(port), home, timeout_s)
    try:
        yield
    finally:
        env = {**os.environ, CONF_ENV: conf, "PATH": os.environ.get("PATH", "") + ":/usr/sbin"}
        _spawn(home, "slurmdbd", ["slurmdbd", "-D"], env)
        _wait_for("slurmdbd", lambda: _port_open(port), home, timeout_s)


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _node_idle(env: dict[str, str]) -> bool:
    try:
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%t"], env=env, capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return False
    return out.stdout.strip() in ("idle", "mix", "alloc")


def stop(root: Path, *, timeout_s: float = 20.0) -> None:
    """Stop every daemon this cluster started (TERM, then KILL its process group) and remove its folder."""
    pointer = root / "cluster"
    if not pointer.exists():
        return
    home = Path(pointer.read_text())
    for name in _DAEMONS:
        pid_file = home / f"{name}.pid"
        if not pid_file.exists():
            continue
        pid = int(pid_file.read_text())
        _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.2)
        _signal_group(pid, signal.SIGKILL)
    shutil.rmtree(home, ignore_errors=True)
    pointer.unlink()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)  # our own child (in-process start): reap it
        if waited:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


if __name__ == "__main__":
    from tests.daemon_cli import daemon_main

    daemon_main(start, stop, sys.argv)
