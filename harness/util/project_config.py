"""The user's project: its folder and its configuration, found as pytest finds its rootdir.

From the working directory up, the first folder holding ``sglang-repro.toml``, or a ``pyproject.toml`` with a
``[tool.sglang-repro]`` table, is the project; its file is the configuration (``sglang-repro.toml`` first when a
folder has both). Without one, the working directory is the project and every value is its default. Relative
paths in the file are relative to its folder; the environment overrides the file, a command-line option both.

Keys (docs/configuration.md)::

    scenarios  = ["scenarios"]     # folders whose YAML files are scenarios (pytest -m sim / gpu, ci-matrix)
    reports    = "reports"         # runs, comparisons, the default store, the dashboard   ($SGLANG_REPRO_REPORTS)
    store      = "..."             # the results store: a path or URL, never a password    ($SGLANG_REPRO_STORE)
    baselines  = "baselines"       # recorded baselines, reviewed like code                ($SGLANG_REPRO_BASELINES)
    fixtures   = []                # folders a scenario's prompt.fixture is looked up in (then the built-in ones)
    signatures = []                # catalogue files merged with the built-in crash signatures

A bad key or value is one line naming the file, the line, the key and what is valid (exit 2). Nothing here
computes a path from the package's own location: an installed harness writes nothing beside itself.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from harness.util.bounded_read import read_bytes
from harness.util.errors import UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the 3.10 runners read TOML with tomli (a dependency there only)
    import tomli as tomllib

__all__ = ["CONFIG_FILE", "ENV", "KEYS", "ProjectConfig", "find_config_file", "project"]

CONFIG_FILE = "sglang-repro.toml"
PYPROJECT = "pyproject.toml"
SECTION = "sglang-repro"
# The environment variable that overrides each key the environment may set.
ENV = {"reports": "SGLANG_REPRO_REPORTS", "store": "SGLANG_REPRO_STORE", "baselines": "SGLANG_REPRO_BASELINES"}
KEYS: dict[str, str] = {
    "scenarios": "a list of folders (strings)",
    "reports": "a folder (a string)",
    "store": "a path or a URL without a password (a string; a secret only from the environment)",
    "baselines": "a folder (a string)",
    "fixtures": "a list of folders (strings)",
    "signatures": "a list of catalogue files (strings)",
}
_LISTS = frozenset({"scenarios", "fixtures", "signatures"})


@dataclass(frozen=True)
class ProjectConfig:
    """The effective configuration; ``sources`` says where each key's value came from."""

    root: Path
    file: Path | None
    scenarios: tuple[Path, ...]
    reports: Path
    store: str | None  # None: ``results.db`` in the reports folder (or a command's --out)
    baselines: Path
    fixtures: tuple[Path, ...]
    signatures: tuple[Path, ...]
    sources: Mapping[str, str] = field(default_factory=dict)
    scenarios_set: bool = False  # the file names its scenario folders (pytest collects only those)


def find_config_file(start: Path | None = None) -> Path | None:
    """The configuration file for ``start`` (default: the working directory), or None."""
    here = Path(os.path.abspath(start or Path.cwd()))
    for folder in (here, *here.parents):
        own = folder / CONFIG_FILE
        if own.is_file():
            return own
        pyproject = folder / PYPROJECT
        if pyproject.is_file() and _has_section(pyproject):
            return pyproject
    return None


def _has_section(pyproject: Path) -> bool:
    try:
        text = read_bytes(pyproject, "config").decode("utf-8", errors="replace")
    except (OSError, UserError):
        return False  # not one of ours to judge: a pyproject.toml the project cannot read is skipped, as pytest does
    return re.search(r"^\s*\[\s*tool\s*\.\s*[\"']?sglang-repro[\"']?\s*[\].]", text, re.MULTILINE) is not None


_PARSED: dict[tuple[str, int, int], tuple[dict[str, Any], str]] = {}


def _table(path: Path) -> tuple[dict[str, Any], str]:
    """The file's sglang-repro table and its text, parsed once per version of the file."""
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key not in _PARSED:
        text = read_bytes(path, "config").decode("utf-8", errors="replace")
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise UserError(f"{path}: not valid TOML: {exc}") from None
        table = data if path.name == CONFIG_FILE else data.get("tool", {}).get(SECTION, {})
        if not isinstance(table, dict):
            raise UserError(f"{path}: [tool.{SECTION}] must be a table of keys ({', '.join(KEYS)})")
        _PARSED.clear()  # one file in use at a time; an edited file is parsed again
        _PARSED[key] = (table, text)
    return _PARSED[key]


@functools.lru_cache(maxsize=64)  # a pure function of its inputs, asked for every key each time project() is read
def _where(path: Path, text: str, key: str) -> str:
    """``FILE:LINE`` of ``key = ...`` (the first such line after the table's header), else ``FILE``."""
    lines = text.splitlines()
    start = 0
    if path.name != CONFIG_FILE:
        start = next((i for i, line in enumerate(lines) if re.match(rf"\s*\[\s*tool\s*\.\s*[\"']?{SECTION}", line)), 0)
    for number in range(start, len(lines)):
        if re.match(rf"\s*[\"']?{re.escape(key)}[\"']?\s*=", lines[number]):
            return f"{path}:{number + 1}"
    return str(path)


def _check(path: Path, text: str, key: str, value: Any) -> None:
    where = _where(path, text, key)
    shown = f"[tool.{SECTION}] {key}" if path.name != CONFIG_FILE else key
    if key not in KEYS:
        raise UserError(f"{where}: {shown}: unknown key; valid keys: {', '.join(KEYS)}")
    ok = (isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value)) if key in _LISTS \
        else isinstance(value, str) and bool(value.strip())
    if not ok:
        raise UserError(f"{where}: {shown}: {_short(value)} is not {KEYS[key]}")
    if key == "store" and _holds_secret(value):
        raise UserError(f"{where}: {shown}: holds a password; a secret comes only from the environment: leave it "
                        f"out (libpq reads $PGPASSWORD or ~/.pgpass) or give the whole URL as ${ENV['store']}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _holds_secret(url: str) -> bool:
    if "://" not in url:
        return bool(re.search(r"(?:^|\s)(?:ssl)?password\s*=", url, re.IGNORECASE))
    parts = urlsplit(url)
    if parts.password:
        return True
    return any(re.search(r"pass|token|secret", k, re.IGNORECASE) for k, _ in parse_qsl(parts.query))


# The last answer, by everything it is a function of: the folder, the file found from it (and its version, as
# _table keys it), the environment it reads. ``validate`` asks once per scenario naming a fixture (100 of 600
# files), and building the answer's paths was 0.4 ms each time.
_LAST: list[tuple[tuple[Any, ...], ProjectConfig]] = []


def project(cwd: Path | None = None) -> ProjectConfig:
    """The effective configuration for the working directory (or ``cwd``): file, then environment."""
    here = Path(os.path.abspath(cwd or Path.cwd()))
    file = find_config_file(here)
    version = None
    if file is not None:
        stat = file.stat()
        version = (stat.st_mtime_ns, stat.st_size)
    key = (here, file, version, tuple(os.environ.get(name) for name in ENV.values()), os.environ.get("HOME"))
    if _LAST and _LAST[0][0] == key:
        return _LAST[0][1]
    found = _project(here, file)
    _LAST[:] = [(key, found)]
    return found


def _project(here: Path, file: Path | None) -> ProjectConfig:
    table: dict[str, Any] = {}
    text = ""
    if file is not None:
        table, text = _table(file)
        for key, value in table.items():
            _check(file, text, key, value)
    root = file.parent if file is not None else here
    sources: dict[str, str] = {}

    def pick(key: str, default: Any) -> Any:
        env = ENV.get(key)
        if env and os.environ.get(env):
            sources[key] = f"${env}"
            return os.environ[env]
        if key in table:
            assert file is not None
            sources[key] = _where(file, text, key)
            return table[key]
        sources[key] = "default"
        return default

    def folder(value: str, key: str) -> Path:
        # a value from the environment is relative to the working directory, one from the file to its folder
        base = here if sources[key].startswith("$") else root
        return Path(os.path.abspath(base / Path(value).expanduser()))

    scenarios = tuple(folder(v, "scenarios") for v in pick("scenarios", ["scenarios"]))
    reports = folder(pick("reports", "reports"), "reports")
    baselines = folder(pick("baselines", "baselines"), "baselines")
    fixtures = tuple(folder(v, "fixtures") for v in pick("fixtures", []))
    signatures = tuple(folder(v, "signatures") for v in pick("signatures", []))
    store = pick("store", None)
    if store is not None and "://" not in store and not sources["store"].startswith("$"):
        store = str(folder(store, "store"))  # a path in the file is the project's; a URL is left as given
    return ProjectConfig(root=root, file=file, scenarios=scenarios, reports=reports, store=store, baselines=baselines,
                         fixtures=fixtures, signatures=signatures, sources=sources,
                         scenarios_set="scenarios" in table)
