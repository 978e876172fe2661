"""The SLURM executor tests run on a real one-node cluster (tests/slurm/_cluster.py) and a real PostgreSQL.

The cluster comes from ``$SLURM_CONF`` (``.ci/run`` starts one) or from a throwaway one this session
starts and stops. When the binaries are missing the tests skip with the reason, except with ``CI`` set:
a CI that silently skipped them would prove nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.slurm import _cluster
from tests.store.conftest import pg_server, pg_url

__all__ = ["pg_server", "pg_url", "slurm_conf"]


@pytest.fixture(scope="session")
def slurm_conf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    given = os.environ.get(_cluster.CONF_ENV)
    if given:
        yield given
        return
    root = tmp_path_factory.mktemp("slurm")
    try:
        conf = _cluster.start(root)
    except Exception as exc:  # no binaries, not root, a daemon that would not start: the reason says which
        message = f"no SLURM cluster for the executor tests: {exc}"
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI is set: .ci/run must start one and export {_cluster.CONF_ENV})")
        pytest.skip(message)
    os.environ[_cluster.CONF_ENV] = conf  # the clients (sbatch, sacct, submitit) and run_cli's children
    try:
        yield conf
    finally:
        del os.environ[_cluster.CONF_ENV]
        _cluster.stop(root)


