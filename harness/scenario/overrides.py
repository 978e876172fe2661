"""``--set FIELD=VALUE``: a scenario changed from the command line, before validation.

A user on other hardware points a seed scenario at their model, GPUs and build without copying the file
(``--set server.model=/models/gemma-4-31B-it --set hardware.gpus=8``). The overrides are applied to the
file's data before it is validated, so they are checked exactly as the file is; an error that lies under an
override names the override instead of a line of the file, which does not hold that value.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.scenario.errors import excerpt
from harness.util.errors import UserError

__all__ = ["SetOverride", "parse_set", "parse_sets", "write_overridden"]

_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_][A-Za-z0-9_.+-]*)*\Z")
_MAX_TEXT = 4096


@dataclass(frozen=True)
class SetOverride:
    """One ``--set``: the dotted field, the value read as a YAML scalar, and the text as the user typed it."""

    path: tuple[str, ...]
    value: Any
    text: str

    @property
    def label(self) -> str:
        return f"--set {self.text}"


def _split_field(field: str) -> tuple[str, ...]:
    # server.args keys are SGLang flags and may hold dots in no known flag; split the first two levels only
    # there, so `server.args.tp-size` is (server, args, tp-size).
    parts = field.split(".")
    if parts[:2] in (["server", "args"], ["server", "env"]) and len(parts) > 3:
        return (*parts[:2], ".".join(parts[2:]))
    return tuple(parts)


def parse_set(text: str) -> SetOverride:
    """``FIELD=VALUE`` as an override; raises UserError (one line) naming what would be valid."""
    field, sep, raw = text.partition("=")
    if len(text) > _MAX_TEXT:
        raise UserError(f"--set {excerpt(text)}: longer than {_MAX_TEXT} characters")
    if not sep or not _FIELD.match(field):
        raise UserError(f"--set {excerpt(text)}: expected FIELD=VALUE with a dotted field, "
                        "e.g. --set hardware.gpus=8 or --set server.model=/models/gemma-4-31B-it")
    if field.split(".")[0] in ("matrix", "reference"):
        raise UserError(f"--set {excerpt(text)}: {field.split('.')[0]} cannot be set from the command line; "
                        "set the fields its cases change (e.g. workload.prompt.tokens)")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        problem = str(getattr(exc, "problem", None) or "not a YAML value")
        raise UserError(f"--set {excerpt(text)}: the value is not a YAML scalar ({problem}); quote it") from None
    if isinstance(value, (dict, list)):
        raise UserError(f"--set {excerpt(text)}: the value must be a scalar (a string, number, true/false or "
                        "null); set a mapping's fields one by one")
    return SetOverride(path=_split_field(field), value=value, text=text)


def parse_sets(texts: Sequence[str] | None) -> tuple[SetOverride, ...]:
    return tuple(parse_set(t) for t in texts or ())


def write_overridden(path: Path, sets: Sequence[SetOverride], folder: Path) -> Path:
    """A copy of the scenario at ``path`` with ``sets`` applied, for processes that read a scenario file again
    (a bisection's steps run in ``git bisect run``): validated first (an error names the override), written
    beside nothing of the user's, under ``folder``, named by its content so that reruns find the same file."""
    import hashlib

    from harness.scenario.loader import load_file
    from harness.scenario.matrix import Override, apply_overrides
    from harness.scenario.source import read_source
    from harness.util.atomic import write_atomic

    load_file(path, overrides=sets)  # the ScenarioError of a bad override, before anything is written
    data = apply_overrides(read_source(path).data, tuple(Override(s.path, s.value, ("--set", i))
                                                         for i, s in enumerate(sets)))
    # the header is one comment line whatever the labels hold (a value with a newline made the copy unreadable) and
    # names no secret (the data below must hold the value: the steps read it)
    from harness.util.redact import redact_everywhere
    from harness.util.text import shown

    header = shown(redact_everywhere(f"{path} with {' '.join(s.label for s in sets)}"))
    text = f"# {header}\n" + yaml.safe_dump(data, sort_keys=False)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    dest = folder / f"{path.stem}-set-{digest}.yaml"
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(dest, text)
    return dest
