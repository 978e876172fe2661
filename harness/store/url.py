"""Where the results store lives: a path or URL from ``--store``, ``$SGLANG_REPRO_STORE`` or the default.

A plain path is an SQLite file; ``sqlite:///PATH`` likewise; ``postgresql://`` and
``postgresql+psycopg://`` name a PostgreSQL server (psycopg 3). Every URL that is shown to a person
or saved goes through :func:`redact_url`, so a password never reaches a log or an artifact.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from harness.util.errors import UserError
from harness.util.paths import reports_root

__all__ = ["DEFAULT_STORE_NAME", "STORE_ENV", "default_store", "redact_url", "store_url"]

STORE_ENV = "SGLANG_REPRO_STORE"
DEFAULT_STORE_NAME = "results.db"
_VALID = "a path (SQLite), sqlite:///PATH, or postgresql+psycopg://USER@HOST/DB"


def default_store(out_root: Path | None = None) -> str:
    """``$SGLANG_REPRO_STORE``, else ``results.db`` in the output root (``reports/``, as runs use)."""
    env = os.environ.get(STORE_ENV)
    if env:
        return env
    return str((out_root or reports_root()) / DEFAULT_STORE_NAME)


def store_url(value: str) -> URL:
    """The SQLAlchemy URL of a store given as a path or a URL; UserError for anything else."""
    text = value.strip()
    if not text:
        raise UserError(f"--store: empty; give {_VALID}")
    if "://" not in text:
        return URL.create("sqlite", database=str(Path(text).expanduser().resolve()))
    try:
        url = make_url(text)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number ("h:notaport", "[::1")
        raise UserError(f"--store {redact_url(text)}: not a URL; give {_VALID}") from None
    if url.drivername in ("postgresql", "postgres", "postgresql+psycopg"):
        return url.set(drivername="postgresql+psycopg")
    if url.drivername in ("sqlite", "sqlite+pysqlite"):
        if not url.database:
            raise UserError(f"--store {redact_url(text)}: an SQLite store needs a file (sqlite:///PATH)")
        return url.set(drivername="sqlite")
    raise UserError(f"--store {redact_url(text)}: unsupported database {url.drivername!r}; give {_VALID}")


# Query parameters that carry a credential (libpq's password and sslpassword, and anything named like a secret).
_SECRET_QUERY = re.compile(r"(?P<key>[?&][^=&#]*(?:pass|token|secret|key|credential|auth)[^=&#]*=)(?P<value>[^&#]*)",
                           re.IGNORECASE)


def redact_url(url: str | URL) -> str:
    """The URL as a person may see it: the password replaced by ``***`` in every form it can take
    (``user:pw@``, ``?password=``, ``?sslpassword=``), also in a URL that does not parse."""
    if isinstance(url, URL):
        shown = url.render_as_string(hide_password=True)
    else:
        try:
            shown = make_url(url).render_as_string(hide_password=True)
        except (ArgumentError, ValueError):
            # Not parseable: drop whatever stands between "://" and the last "@", where a password would be.
            head, sep, rest = url.partition("://")
            authority, slash, path = rest.partition("/")
            shown = f"{head}://***@{authority.rsplit('@', 1)[1]}{slash}{path}" if sep and "@" in authority else url
    return _SECRET_QUERY.sub(lambda m: f"{m.group('key')}***", shown)
