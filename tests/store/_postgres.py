"""A throwaway PostgreSQL server for the store tests (and for ``.ci/run``).

``initdb`` refuses to run as root, so as root the cluster is made and started as the ``postgres``
user; it trusts local connections, listens on 127.0.0.1 only and keeps its socket in its own
temporary folder. ``python -m tests.store._postgres start DIR`` prints the URL; ``stop DIR`` stops it.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.helpers import free_port

__all__ = ["PG_ENV", "pg_bindir", "start", "stop"]

PG_ENV = "SGLANG_REPRO_TEST_PG_URL"


def pg_bindir() -> Path | None:
    """The folder holding initdb and pg_ctl (Debian keeps them off PATH), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _as_owner(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def start(root: Path, *, timeout_s: float = 60.0) -> str:
    """Make and start a cluster under ``root``; the URL of its ``postgres`` database."""
    bindir = pg_bindir()
    if bindir is None:
        raise RuntimeError("PostgreSQL is not installed (no initdb; Debian: apt-get install postgresql)")
    root.mkdir(parents=True, exist_ok=True)
    # The cluster lives in a folder of its own under the system temp dir: ``root`` may sit below a
    # folder only root can enter (pytest's, mktemp's), which the postgres user could not traverse.
    cluster = Path(tempfile.mkdtemp(prefix="sglang-repro-pg-"))
    cluster.chmod(0o755)
    (root / "cluster").write_text(str(cluster))
    data, sock = cluster / "data", cluster / "sock"
    sock.mkdir()
    if os.geteuid() == 0:
        shutil.chown(cluster, "postgres")
        shutil.chown(sock, "postgres")
    port = free_port()
    subprocess.run(_as_owner([str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
                              "--no-sync", "-E", "UTF8"]),
                   check=True, capture_output=True, timeout=timeout_s)
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {sock} -c fsync=off -c max_connections=200"
    subprocess.run(_as_owner([str(bindir / "pg_ctl"), "-D", str(data), "-l", str(cluster / "server.log"),
                              "-o", options, "-w", "-t", str(int(timeout_s)), "start"]),
                   check=True, capture_output=True, timeout=timeout_s + 5)
    (root / "port").write_text(str(port))
    return f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"


def stop(root: Path) -> None:
    bindir = pg_bindir()
    pointer = root / "cluster"
    if bindir is None or not pointer.exists():
        return
    cluster = Path(pointer.read_text())
    subprocess.run(_as_owner([str(bindir / "pg_ctl"), "-D", str(cluster / "data"), "-m", "immediate", "-w", "stop"]),
                   capture_output=True, timeout=60)
    shutil.rmtree(cluster, ignore_errors=True)


if __name__ == "__main__":
    from tests.daemon_cli import daemon_main

    daemon_main(start, stop, sys.argv)
