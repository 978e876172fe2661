"""The SLURM executor tests run on a real one-node cluster (tests/slurm/_cluster.py) and a real PostgreSQL.

The cluster comes from ``$SLURM_CONF`` (``.ci/run`` starts one) or from a throwaway one this session
starts and stops. When the binaries are missing the tests skip with the reason, except with ``CI`` set:
a CI that silently skipped them would prove nothing.

``slurm_conf_no_accounting`` is a second cluster, always this session's own, configured as a small
cluster is by default (``AccountingStorageType=accounting_storage/none``; issue 37). It runs beside the
first on its own ports, and is never put in ``os.environ``: its tests hand its ``SLURM_CONF`` to their
children, so the accounting cluster's tests on the same worker (xdist group ``slurm``) are unaffected.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NoReturn

import pytest

from tests.slurm import _cluster
from tests.store.conftest import pg_server, pg_url

__all__ = ["pg_server", "pg_url", "slurm_conf", "slurm_conf_no_accounting"]


def _no_cluster(exc: Exception, ci_hint: str) -> NoReturn:
    """Skip with the reason (no binaries, not root, a daemon that would not start: the reason says which), or
    fail under CI."""
    message = f"no SLURM cluster for the executor tests: {exc}"
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI is set: {ci_hint})")
    pytest.skip(message)


@pytest.fixture(scope="session")
def slurm_conf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    given = os.environ.get(_cluster.CONF_ENV)
    if given:
        yield given
        return
    root = tmp_path_factory.mktemp("slurm")
    try:
        conf = _cluster.start(root)
    except Exception as exc:
        _no_cluster(exc, f".ci/run must start one and export {_cluster.CONF_ENV}")
    os.environ[_cluster.CONF_ENV] = conf  # the clients (sbatch, sacct, submitit) and run_cli's children
    try:
        yield conf
    finally:
        del os.environ[_cluster.CONF_ENV]
        _cluster.stop(root)


@pytest.fixture(scope="session")
def slurm_conf_no_accounting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("slurm-noacct")
    try:
        conf = _cluster.start(root, accounting=False)  # a failed start has stopped what it started
    except Exception as exc:
        _no_cluster(exc, ".ci/run installs slurm-wlm and munge, all this cluster needs")
    try:
        yield conf
    finally:
        _cluster.stop(root)
