"""What the harness keeps about a build between runs, so that each is paid for once.

Two things are kept, in one small JSON file per build interpreter under ``<cache>/builds/``
(``$SGLANG_REPRO_CACHE``, else ``~/.cache/sglang-repro``), behind a file lock:

- **flag checks**: the verdict of the build's own flag parser on a flag set. A real sglang parser
  costs seconds to load (it imports torch), and every run of a compare asks it about the same few
  flag sets. The key is the flag set with ``--host``/``--port`` left out (each run leases its own
  port; both are plain typed values that never decide a verdict). The results are stamped with the
  parser's identity: how the harness parses (its script), the build's interpreter, environment
  overlay, sglang version, commit and location, and the size and mtime of sglang's
  ``srt/server_args*.py``, ``srt/arg_groups/*.py`` (the parser's own code) and its installed
  ``RECORD``. Reinstalling sglang, moving to another commit or editing those files clears them. A
  build whose sglang location is unknown is never cached. (A ``src:`` checkout used as it is can
  still change other modules the parser reads choices from, e.g. the function-call parsers, without
  a commit; those edits are not seen.)
- **answers about the build's sources** (:func:`cached_answer`, e.g. pre-flight's contract check):
  kept under a section name, stamped with whatever identity the caller gives (it includes the size and
  mtime of the files the answer was read from), recomputed when that identity changes.
- **the environment description** (``env.json``): the package list of the build's interpreter,
  read by a subprocess (about 0.2 s). Stamped with the interpreter, overlay, sglang version and
  commit, and the mtime of every directory on the interpreter's ``sys.path``: installing,
  removing or upgrading a distribution changes its directory's entries and so its mtime.

Only answers are kept: a parser that cannot be loaded, or a probe that fails, raises as before and
leaves nothing behind. A cache that cannot be read or written (permissions, a lock held too long)
costs the subprocess again, never the run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from harness.build.environments import default_cache_dir
from harness.build.resolve import Build
from harness.util.atomic import write_atomic
from harness.util.bounded_read import ReadRefused, read_json

__all__ = ["cache_file", "cached_answer", "cached_environment", "cached_flag_checks", "file_stamps", "flag_set_key"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_LOCK_TIMEOUT_S = 30.0
_VALUE_FLAGS_LEFT_OUT = ("--host", "--port")
_ENVIRONMENTS_KEPT = 8  # per interpreter; older ones are dropped


def flag_set_key(flags: Sequence[str]) -> str:
    """The cache key of a flag set: the flags in order, ``--host``/``--port`` and their values left out."""
    kept: list[str] = []
    skip_next = False
    for flag in flags:
        if skip_next:
            skip_next = False
            continue
        if flag in _VALUE_FLAGS_LEFT_OUT:
            skip_next = True
            continue
        if flag.partition("=")[0] in _VALUE_FLAGS_LEFT_OUT and "=" in flag:
            continue
        kept.append(flag)
    return json.dumps(kept)


def cache_file(build: Build, cache_dir: Path | None = None) -> Path:
    """Where ``build``'s answers are kept (one file per interpreter and environment overlay)."""
    name = hashlib.sha256(json.dumps([build.python, sorted(build.env.items())]).encode()).hexdigest()[:16]
    return (cache_dir or default_cache_dir()) / "builds" / f"{name}.json"


def _stat(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def _parser_identity(build: Build, method: str) -> dict[str, Any] | None:
    if not build.location:
        return None
    pkg = Path(build.location)
    # ServerArgs.add_cli_args builds the parser from the dataclass's field metadata with the helpers
    # of srt/arg_groups/ (sglang/srt/server_args.py: 0.5.14 line 6257, 0.5.15 line 6142).
    files = sorted(pkg.glob("srt/server_args*.py"))
    if not files:
        return None
    files += sorted(pkg.glob("srt/arg_groups/*.py")) + sorted(pkg.parent.glob("sglang-*.dist-info/RECORD"))
    return {"method": hashlib.sha256(method.encode()).hexdigest()[:16], "python": build.python,
            "env": dict(sorted(build.env.items())), "version": build.version, "commit": build.commit,
            "location": str(pkg), "files": {str(f): _stat(f) for f in files}}  # fmt: skip


def _base_identity(build: Build) -> dict[str, Any]:
    return {"python": build.python, "python_stat": _stat(Path(build.python)), "env": dict(sorted(build.env.items())),
            "version": build.version, "commit": build.commit, "location": build.location}  # fmt: skip


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[dict[str, Any] | None]:
    """The file's content under its lock (``{}`` when absent), or None when the cache is unusable."""
    import filelock  # here, not at the top: the scenario format imports this package, and `validate` needs no lock

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = filelock.FileLock(str(path) + ".lock", timeout=_LOCK_TIMEOUT_S)
        lock.acquire()
    except (OSError, filelock.Timeout) as exc:
        log.warning("build cache %s unusable (%s); not cached", path, exc)
        yield None
        return
    try:
        try:
            data = read_json(path, "state") if path.exists() else {}
        except (OSError, ValueError, ReadRefused):
            data = {}  # a torn or foreign file: start over
        yield data if isinstance(data, dict) else {}
    finally:
        lock.release()


def _write(path: Path, data: dict[str, Any]) -> None:
    try:
        write_atomic(path, json.dumps(data, indent=1))
    except OSError as exc:
        log.warning("cannot write build cache %s (%s)", path, exc)


def cached_flag_checks(
    build: Build,
    flag_sets: Sequence[Sequence[str]],
    parse: Callable[[list[list[str]]], list[T]],
    record: type[T],
    *,
    method: str,
    cache_dir: Path | None = None,
) -> list[T]:
    """The parser's verdicts on ``flag_sets``: kept ones as they are, the rest from one ``parse`` call.

    ``parse`` gets only the flag sets not yet known (each once), in one batch, and returns one
    ``record`` (a dataclass) per set; nothing is started when every set is known. ``method`` is
    how ``parse`` parses (its script): a different method is a different parser.
    """
    identity = _parser_identity(build, method)
    if identity is None:
        return parse([list(f) for f in flag_sets])
    keys = [flag_set_key(f) for f in flag_sets]
    path = cache_file(build, cache_dir)
    with _locked(path) as data:
        section = (data or {}).get("flag_checks") or {}
        known: dict[str, Any] = section.get("results", {}) if section.get("identity") == identity else {}
    todo = {key: list(flags) for key, flags in zip(keys, flag_sets, strict=True) if key not in known}
    if todo:
        fresh = parse(list(todo.values()))  # outside the lock: seconds of sglang's imports
        found = {key: dict(vars(result)) for key, result in zip(todo, fresh, strict=True)}
        with _locked(path) as data:
            if data is not None:
                section = data.get("flag_checks") or {}
                kept = section.get("results", {}) if section.get("identity") == identity else {}
                data["flag_checks"] = {"identity": identity, "results": {**kept, **found}}
                _write(path, data)
        known = {**known, **found}
    return [record(**known[key]) for key in keys]


def _dirs_fresh(dirs: Mapping[str, Any]) -> bool:
    return all(_stat(Path(d)) == stamp for d, stamp in dirs.items())


def cached_environment(
    build: Build, probe: Callable[[], dict[str, Any]], *, cache_dir: Path | None = None
) -> dict[str, Any]:
    """The facts ``probe`` returns about the build's interpreter, probed again only when its install changed.

    ``probe`` must return a ``path`` entry: the directories on the interpreter's ``sys.path``.
    """
    identity = _base_identity(build)
    # Builds sharing an interpreter (the reference server's revisions) keep an entry each.
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    path = cache_file(build, cache_dir)
    with _locked(path) as data:
        entry = ((data or {}).get("environment") or {}).get(digest) or {}
    if entry.get("identity") == identity and _dirs_fresh(entry.get("dirs", {})):
        facts: dict[str, Any] = entry["facts"]
        return facts
    facts = probe()
    dirs = {d: _stat(Path(d)) for d in facts.get("path", [])}
    with _locked(path) as data:
        if data is not None:
            entries = data.get("environment") or {}
            entries.pop(digest, None)
            kept = dict(list(entries.items())[-(_ENVIRONMENTS_KEPT - 1):])
            data["environment"] = {**kept, digest: {"identity": identity, "dirs": dirs, "facts": facts}}
            _write(path, data)
    return facts


def file_stamps(paths: Sequence[Path]) -> dict[str, list[int] | None]:
    """Size and mtime of each path (None when absent): an identity that changes when a file does."""
    return {str(p): _stat(p) for p in paths}


def cached_answer(build: Build, section: str, identity: Mapping[str, Any], compute: Callable[[], Any], *,
                  cache_dir: Path | None = None) -> Any:
    """``compute()``'s JSON-able answer for ``build``, kept under ``section`` while ``identity`` holds."""
    ident = json.loads(json.dumps(identity))  # as it reads back from the file
    path = cache_file(build, cache_dir)
    with _locked(path) as data:
        entry = (data or {}).get(section) or {}
    if entry.get("identity") == ident and "answer" in entry:
        return entry["answer"]
    answer = compute()
    with _locked(path) as data:
        if data is not None:
            data[section] = {"identity": ident, "answer": answer}
            _write(path, data)
    return answer
