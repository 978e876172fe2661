"""Where the results store lives: a path or URL from ``--store``, ``$SGLANG_REPRO_STORE`` or the default.

A plain path is an SQLite file; ``sqlite:///PATH`` likewise; ``postgresql://`` and
``postgresql+psycopg://`` name a PostgreSQL server (psycopg 3). Every URL that is shown to a person
or saved goes through :func:`redact_url`, so a password never reaches a log or an artifact.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import quote, quote_plus, unquote_plus

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from harness.util.errors import UserError
from harness.util.paths import reports_root
from harness.util.project_config import project

__all__ = ["DEFAULT_STORE_NAME", "STORE_ENV", "check_libpq_files", "default_store", "redact_url", "store_url"]

STORE_ENV = "SGLANG_REPRO_STORE"
DEFAULT_STORE_NAME = "results.db"
_VALID = "a path (SQLite), sqlite:///PATH, or postgresql+psycopg://USER@HOST/DB"
# libpq's "host=H password=P dbname=D" form: not a path, and shown only redacted.
_LIBPQ_DSN = re.compile(r"(?:^|\s)(?:host|hostaddr|port|dbname|user|password|passfile|service|sslmode|options"
                        r"|sslpassword|connect_timeout)\s*=", re.IGNORECASE)


def default_store(out_root: Path | None = None) -> str:
    """``$SGLANG_REPRO_STORE``, else the project's ``store``, else ``results.db`` in the output root (``reports/``,
    as runs use)."""
    configured = project().store  # the environment's value first (harness.util.project_config)
    if configured:
        return configured
    return str((out_root or reports_root()) / DEFAULT_STORE_NAME)


def store_url(value: str) -> URL:
    """The SQLAlchemy URL of a store given as a path or a URL; UserError for anything else."""
    text = value.strip()
    if not text:
        raise UserError(f"--store: empty; give {_VALID}")
    if "://" not in text:
        if _LIBPQ_DSN.search(text):  # taken as a path, it would create a file named with the password
            raise UserError(f"--store: a libpq keyword string ({redact_url(text)}); give {_VALID}")
        # Made absolute, not resolved: a link is refused where the store is opened, never followed to its target.
        return URL.create("sqlite", database=os.path.abspath(Path(text).expanduser()))
    if _two_ats(text):  # SQLAlchemy and libpq split at the first "@": the rest of the password becomes the host,
        # sent to DNS and echoed back in the driver's error (issue 37's bench: "failed to resolve host '<pw>@h'")
        raise UserError(f"--store {redact_url(text)}: more than one '@' before the host; write an '@' in the "
                        "user or password as %40")
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


def _two_ats(text: str) -> bool:
    rest = text.partition("://")[2]
    end = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    return rest.count("@", 0, end) > 1


# Query parameters that carry a credential (libpq's password and sslpassword, and anything named like a secret).
_SECRET_KEY = re.compile(r"pass|token|secret|key|credential|auth", re.IGNORECASE)
_QUERY_ITEM = re.compile(r"(?P<key>[?&][^=&#]*=)(?P<value>[^&#]*)")
# A password inside another parameter's value (libpq's options="-c password=..."), or in a keyword DSN.
_INNER_PASSWORD = re.compile(r"(?:^|[\s,])[A-Za-z_]*pass(?:word)?\s*=\s*'?(?P<value>[^\s',&#]+)", re.IGNORECASE)
_INNER_MASK = re.compile(r"(?P<key>(?<![A-Za-z])(?:ssl)?pass(?:word)?\s*(?:=|%3D)\s*'?)(?P<value>[^\s',&#%]+)",
                         re.IGNORECASE)
_MIN_REPEAT = 3  # a password this long is also masked wherever it reappears (a 2-letter one would mangle the URL)


def _secrets_of(text: str) -> tuple[str, set[str]]:
    """``text`` with its userinfo password masked, and every secret value it holds (raw and %-decoded)."""
    found: set[str] = set()
    head, sep, rest = text.partition("://")
    if sep:
        query = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
        last_at = rest.rfind("@", 0, query)  # a password may hold an unescaped "@" or "/": the last "@" ends it
        slash = rest.find("/", max(last_at, 0))
        end = slash if 0 <= slash < query else query
        authority, tail = rest[:end], rest[end:]
        userinfo, at, host = authority.rpartition("@")  # the LAST "@": a password may hold unescaped "@"
        if at and ":" in userinfo:
            user, _colon, password = userinfo.partition(":")
            found.add(password)
            text = f"{head}://{user}:***@{host}{tail}"
    for m in _QUERY_ITEM.finditer(text):
        value = unquote_plus(m.group("value"))
        if _SECRET_KEY.search(m.group("key")):
            found.update((m.group("value"), value))
        for inner in _INNER_PASSWORD.finditer(value):
            found.add(inner.group("value"))
    for inner in _INNER_PASSWORD.finditer(text if not sep else ""):  # a keyword DSN: "host=h password=p"
        found.add(inner.group("value"))
    found = {v for v in found for v in (v, quote(v, safe=""), quote_plus(v, safe="")) if v}
    return text, found


def redact_url(url: str | URL) -> str:
    """The URL as a person may see it: the password replaced by ``***`` in every form it can take
    (``user:pw@`` with any characters in it, ``?password=``, ``?sslpassword=``, ``options=-c password=``,
    a keyword DSN), and wherever its value reappears (``?application_name=<pw>``), also in a URL that does
    not parse."""
    text = url.render_as_string(hide_password=False) if isinstance(url, URL) else str(url)
    shown, found = _secrets_of(text)
    shown = _QUERY_ITEM.sub(lambda m: f"{m.group('key')}***" if _SECRET_KEY.search(m.group("key")) else m.group(0),
                            shown)
    shown = _INNER_MASK.sub(lambda m: f"{m.group('key')}***", shown)
    for value in sorted(found, key=len, reverse=True):
        if len(value) >= _MIN_REPEAT:
            shown = shown.replace(value, "***")
    return shown


# The files libpq reads while it connects, by URL parameter and environment variable: a FIFO among them
# blocks the open (no connect_timeout covers it), a device is read without end.
_LIBPQ_FILES = (("passfile", "PGPASSFILE"), ("service file", "PGSERVICEFILE"), ("sslcert", "PGSSLCERT"),
                ("sslkey", "PGSSLKEY"), ("sslrootcert", "PGSSLROOTCERT"), ("sslcrl", "PGSSLCRL"))


def _libpq_paths(url: URL) -> list[tuple[str, str]]:
    home = Path.home()
    out: list[tuple[str, str]] = []
    for name, env in _LIBPQ_FILES:
        param = name.replace(" file", "file")
        value = url.query.get(param) or os.environ.get(env)
        if isinstance(value, tuple):
            value = value[-1]
        if value:
            out.append((f"libpq's {name} ({'?' + param + '=' if url.query.get(param) else '$' + env})", value))
    if not any(label.startswith("libpq's passfile") for label, _ in out):
        out.append(("libpq's passfile (~/.pgpass)", str(home / ".pgpass")))
    if not any(label.startswith("libpq's service file") for label, _ in out):
        out.append(("libpq's service file (~/.pg_service.conf)", str(home / ".pg_service.conf")))
    if os.environ.get("PGSYSCONFDIR"):
        out.append(("libpq's service file ($PGSYSCONFDIR)", str(Path(os.environ["PGSYSCONFDIR"]) / "pg_service.conf")))
    return out


def check_libpq_files(url: URL) -> None:
    """UserError (exit 2) when a file libpq would read while connecting exists and is not a regular file."""
    import stat

    from harness.util.bounded_read import kind_of_mode

    for label, value in _libpq_paths(url):
        path = Path(value).expanduser()
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue  # absent (libpq skips it) or unreachable (libpq fails at once, with its own message)
        if not stat.S_ISREG(mode):
            raise UserError(f"store {redact_url(url)}: {label} {path}: {kind_of_mode(mode)}; libpq reads it while "
                            "connecting and would wait on it without a deadline; give a regular file")
