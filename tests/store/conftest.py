"""Store tests run on SQLite and on a real PostgreSQL.

PostgreSQL comes from ``$SGLANG_REPRO_TEST_PG_URL`` (``.ci/run`` starts one) or from a throwaway
server this session starts; each test gets a database of its own. When ``CI`` is set and no
PostgreSQL can be had, the PostgreSQL tests fail: a CI that silently skipped them would prove nothing.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from tests.store import _postgres


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = os.environ.get(_postgres.PG_ENV)
    if url:
        yield url
        return
    root = tmp_path_factory.mktemp("pg")
    try:
        url = _postgres.start(root)
    except Exception as exc:  # any reason at all: no binaries, no postgres user, a start that failed
        message = f"no PostgreSQL for the store tests: {exc}"
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI is set: {_postgres.PG_ENV} must name a server)")
        pytest.skip(message)
    try:
        yield url
    finally:
        _postgres.stop(root)


def _fresh_pg_database(server_url: str) -> str:
    name = f"t_{secrets.token_hex(6)}"
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty store of each kind."""
    if request.param == "sqlite":
        return str(tmp_path / "results.db")
    return _fresh_pg_database(request.getfixturevalue("pg_server"))


@pytest.fixture
def pg_url(pg_server: str) -> str:
    return _fresh_pg_database(pg_server)
