"""``--set FIELD=VALUE``: a scenario changed from the command line, before validation.

A user on other hardware points a seed scenario at their model, GPUs and build without copying the file
(``--set server.model=/models/gemma-4-31B-it --set hardware.gpus=8``). The overrides are applied to the
file's data before it is validated, so they are checked exactly as the file is; an error that lies under an
override names the override instead of a line of the file, which does not hold that value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.scenario.errors import excerpt
from harness.util.errors import UserError

__all__ = ["SECRET_SETS_ENV", "SetOverride", "is_secret_set", "parse_set", "parse_sets", "recorded_set",
           "secret_sets_from_env", "split_secrets", "write_overridden"]

# The secret overrides of a bisection travel to its steps here, never in the scenario copy they read (a copy is a
# file under reports/ that outlives the search and gets attached to issues). The name holds SECRET, so the
# redaction owner removes this variable's value from every artifact as it does HF_TOKEN's.
SECRET_SETS_ENV = "SGLANG_REPRO_SECRET_SETS"

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
    if "\n" in text or "\r" in text:
        # YAML folds a line break into a space, so the scenario would silently hold another value than typed
        raise UserError(f"--set {excerpt(_redacted(field, raw))}: the value holds a line break; "
                        "give a one-line value")
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


def _redacted(field: str, raw: str) -> str:
    from harness.util.redact import REDACTED, redact_everywhere

    if _names_a_secret(tuple(field.split("."))):
        return f"{field}={REDACTED}"
    return redact_everywhere(f"{field}={raw}")


def parse_sets(texts: Sequence[str] | None) -> tuple[SetOverride, ...]:
    return tuple(parse_set(t) for t in texts or ())


def _names_a_secret(path: tuple[str, ...]) -> bool:
    from harness.util.redact import is_secret_flag, is_secret_name

    last = path[-1] if path else ""
    if path[:2] == ("server", "args"):
        return is_secret_flag(f"--{last}")
    return is_secret_name(last)


def is_secret_set(s: SetOverride) -> bool:
    """Whether an override carries a secret: by the field it sets (``server.env.HF_TOKEN``, ``server.args.api-key``)
    or by its value (a token's shape, a secret variable's value of this process, one registered)."""
    from harness.util.redact import registered_secrets, secret_values, shape_values

    if _names_a_secret(s.path):
        return s.value is not None and str(s.value).strip() != ""
    text = str(s.value)
    return bool(shape_values(text)) or any(v in text for v in secret_values() | registered_secrets())


def recorded_set(s: SetOverride) -> str:
    """The override as a run records it, to be given again (an incident's ``next:``): as typed, or for a secret
    ``FIELD=${VAR}``, a reference to a variable the user sets (``server.env.HF_TOKEN=${HF_TOKEN}``; a flag's value
    ``server.args.api-key=${API_KEY}``), never the value."""
    if not is_secret_set(s):
        return s.text
    last = s.path[-1]
    var = last if s.path[:2] == ("server", "env") else re.sub(r"[^A-Za-z0-9]+", "_", last).upper().strip("_") or "SECRET"
    return f"{'.'.join(s.path)}=${{{var}}}"


def split_secrets(data: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[SetOverride, ...]]:
    """A scenario mapping without its secret server variables and flags (by name or value, :func:`is_secret_set`),
    and the overrides that put them back on load: what a writer of scenario copies (minimize's candidates and
    minimal.yaml) saves, and what it loads the copy with."""
    import copy

    from harness.util.redact import REDACTED

    out = copy.deepcopy(dict(data))
    server = out.get("server")
    back: list[SetOverride] = []
    for part in ("env", "args"):
        entries = server.get(part) if isinstance(server, dict) else None
        if not isinstance(entries, dict):
            continue
        for name, value in list(entries.items()):
            field = f"server.{part}.{name}"
            if is_secret_set(SetOverride(("server", part, str(name)), value, f"{field}={value}")):
                back.append(SetOverride(("server", part, str(name)), entries.pop(name), f"{field}={REDACTED}"))
    return out, tuple(back)


def secret_sets_from_env() -> tuple[SetOverride, ...]:
    """The secret overrides a bisection handed its steps in ``$SGLANG_REPRO_SECRET_SETS`` (a JSON list of
    ``FIELD=VALUE`` texts); none when it is unset."""
    import json

    raw = os.environ.get(SECRET_SETS_ENV, "").strip()
    if not raw:
        return ()
    try:
        texts = json.loads(raw)
    except ValueError:
        raise UserError(f"${SECRET_SETS_ENV}: not a JSON list of FIELD=VALUE texts") from None
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise UserError(f"${SECRET_SETS_ENV}: not a JSON list of FIELD=VALUE texts")
    return parse_sets(texts)


def write_overridden(path: Path, sets: Sequence[SetOverride], folder: Path) -> Path:
    """A copy of the scenario at ``path`` with ``sets`` applied, for processes that read a scenario file again
    (a bisection's steps run in ``git bisect run``): validated first (an error names the override), written
    beside nothing of the user's, under ``folder``, named by its content so that reruns find the same file.

    Secret overrides (:func:`is_secret_set`) are left out of the copy: its header names their fields, and the
    caller hands them to the processes that read it (``$SGLANG_REPRO_SECRET_SETS``, :func:`secret_sets_from_env`);
    a user runs the copy with the same ``--set`` again."""
    import hashlib

    from harness.scenario.loader import load_file
    from harness.scenario.matrix import Override, apply_overrides
    from harness.scenario.source import read_source
    from harness.util.atomic import write_atomic

    load_file(path, overrides=sets)  # the ScenarioError of a bad override, before anything is written
    plain = [s for s in sets if not is_secret_set(s)]
    kept_out = [".".join(s.path) for s in sets if is_secret_set(s)]
    data = apply_overrides(read_source(path).data, tuple(Override(s.path, s.value, ("--set", i))
                                                         for i, s in enumerate(plain)))
    # the header is one comment line whatever the labels hold, and names no secret
    from harness.util.redact import redact_everywhere
    from harness.util.text import shown

    header = shown(redact_everywhere(f"{path} with {' '.join(s.label for s in plain) or 'no other change'}"))
    if kept_out:
        header += shown(f"; secrets kept out of this file (run it with --set for each): {', '.join(kept_out)}")
    text = f"# {header}\n" + yaml.safe_dump(data, sort_keys=False)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    dest = folder / f"{path.stem}-set-{digest}.yaml"
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(dest, text)
    return dest
