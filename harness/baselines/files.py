"""Reading and writing ``<baselines>/<scenario>.yaml`` (the project's ``baselines`` folder; ``fixtures/baselines`` here).

Read as scenarios are (:mod:`harness.scenario.source`: plain YAML only, duplicate keys refused, bounded),
validated strictly, every problem one ``FILE:LINE:COL: FIELD: message`` line (exit 2). Written whole and
atomically, in a stable order, so a re-recording's diff is the change and nothing else.
"""

from __future__ import annotations

import difflib
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from harness.baselines.model import BaselineFile, Entry, slug
from harness.scenario.errors import ScenarioError, format_line, validation_lines
from harness.scenario.source import SourceError, read_source
from harness.util.atomic import write_atomic
from harness.util.project_config import project

__all__ = ["BASELINES_ENV", "BaselineFileError", "dump", "load", "baselines_dir", "baselines_path", "locked",
           "render_diff", "save"]

# Where the baselines live; a test (or a CI job with its own) points it elsewhere.
BASELINES_ENV = "SGLANG_REPRO_BASELINES"

_HEADER = """\
# Recorded baselines of scenario {name}: reviewed data, written by
# `sglang-repro baselines record` or `pytest --update-baselines` (docs/baselines.md).
# One entry per case x hardware (GPU model and count; CPU model and cores for the reference server) x
# build line; each figure is the mean and sample sd over `trials` trials. `replaced` keeps what a
# re-recording replaced.
"""


class BaselineFileError(ScenarioError):
    """A baselines file that does not validate; one line per problem."""


def baselines_dir() -> Path:
    """``$SGLANG_REPRO_BASELINES``, else the project's ``baselines`` folder (harness.util.project_config)."""
    return project().baselines


def baselines_path(scenario_name: str, folder: Path | None = None) -> Path:
    return (folder or baselines_dir()) / f"{slug(scenario_name)}.yaml"


def load(path: Path) -> BaselineFile | None:
    """The file's baselines; None when there is no file; BaselineFileError when it does not validate."""
    if not path.exists():
        return None
    try:
        source = read_source(path)
    except SourceError as exc:
        raise BaselineFileError([format_line(path, (exc.line, exc.column), exc.field, exc.message)]) from None
    except OSError as exc:
        raise BaselineFileError([format_line(path, (1, 1), "", f"cannot read: {exc.strerror or exc}")]) from None
    try:
        return BaselineFile.model_validate(source.data)
    except ValidationError as exc:
        raise BaselineFileError(validation_lines(exc, model=BaselineFile, data=source.data, file=path,
                                                  position=source.position)) from None


def _plain(entry: Entry) -> dict[str, Any]:
    return entry.model_dump(mode="json", exclude_none=True, exclude_defaults=False)


def dump(refs: BaselineFile) -> str:
    """The file's text: header, then the data in a stable order (entries sorted by their key)."""
    entries = sorted(refs.baselines, key=lambda e: e.key)
    data = {"version": refs.version, "scenario": refs.scenario, "baselines": [_plain(e) for e in entries]}
    body = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=110, allow_unicode=True)
    return _HEADER.format(name=refs.scenario) + body


def render_diff(path: Path, old_text: str, new_text: str) -> str:
    """A unified diff of the file as it is and as it would be written ('' when unchanged)."""
    lines = difflib.unified_diff(old_text.splitlines(keepends=True), new_text.splitlines(keepends=True),
                                 fromfile=f"{path} (now)", tofile=f"{path} (recorded)")
    return "".join(lines)


def save(path: Path, refs: BaselineFile) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, dump(refs))


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """One writer of a baselines file at a time, from read to write: two recorders of one scenario (two CLIs, xdist
    workers) each read the file, add their entry and write it whole, so without it the later write dropped the other's
    entry (1 round in 6 of two concurrent CLIs). The lock file sits beside the file and is never followed as a link."""
    from harness.util.output_path import refuse_links

    refuse_links(path.parent, "the baselines folder")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
