"""Turning validation problems into one line each: ``FILE:LINE:COL: FIELD: what is wrong``."""

from __future__ import annotations

import difflib
import reprlib
import types
import typing
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from harness.util.errors import UserError

__all__ = ["ScenarioError", "excerpt", "format_line", "validation_lines"]

_MAX_FIELD = 120  # a key is text from the file: a long one is shortened, never printed whole
_MAX_MESSAGE = 600


class ScenarioError(UserError):
    """One or more problems in scenario files; each line stands alone."""

    def __init__(self, lines: Sequence[str]) -> None:
        # redacted where the lines are made: they quote --set values and file text, and reach the terminal, pytest's
        # collection errors and its JUnit XML (a `--set hardware.gpus=hf_...` token was kept there)
        from harness.util.redact import redact_everywhere

        lines = [redact_everywhere(line) for line in lines]
        super().__init__("\n".join(lines))
        self.lines = list(lines)


def _short_repr() -> reprlib.Repr:
    r = reprlib.Repr()
    r.maxlevel, r.maxlist, r.maxtuple, r.maxdict, r.maxset = 2, 4, 4, 4, 4
    r.maxstring, r.maxother, r.maxlong = 48, 48, 24
    return r


_REPR = _short_repr()


def excerpt(value: Any, *, limit: int = 60, quote: bool = True) -> str:
    """A short view of a value from the file for an error line: never the whole of a large value.

    ``repr`` would build the full text first (a shared alias structure can stand for gigabytes);
    :mod:`reprlib` stops after a few items and characters, so this costs the same for any value.
    """
    if isinstance(value, str) and not quote:
        text = value if len(value) <= limit else value[: limit - 3] + "..."
        return text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text
    try:
        text = _REPR.repr(value)
    except ValueError:  # e.g. an int too long to print
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def format_line(path: Path | str, pos: tuple[int, int], field: str, message: str) -> str:
    """One error line. The field path and message are cut to a bound and kept on one line."""
    where = f"{_one_line(str(path))}:{pos[0]}:{pos[1]}"
    field = _bounded(_one_line(field), _MAX_FIELD)
    message = _bounded(_one_line(message), _MAX_MESSAGE)
    return f"{where}: {field}: {message}" if field else f"{where}: {message}"


def _one_line(text: str) -> str:
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _model_in(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model class inside an annotation, and whether it sits behind a dict key."""
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    if origin is dict:
        inner, _ = _model_in(typing.get_args(annotation)[1])
        return inner, True
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found, keyed = _model_in(arg)
            if found is not None:
                return found, keyed
    return None, False


def valid_keys(model: type[BaseModel], loc: Sequence[Any]) -> list[str] | None:
    """The field names allowed at ``loc`` (a path into the data), or None for free-form mappings."""
    current: type[BaseModel] | None = model
    i = 0
    while i < len(loc):
        if current is None:
            return None
        field = current.model_fields.get(loc[i]) if isinstance(loc[i], str) else None
        if field is None:
            return None
        current, keyed = _model_in(field.annotation)
        i += 2 if keyed else 1
    return list(current.model_fields) if current is not None else None


def _data_path(loc: Iterable[Any], data: Any) -> list[Any]:
    """Drop pydantic's union-member tags from ``loc``: keep the parts that index the data."""
    out: list[Any] = []
    node = data
    for part in loc:
        in_dict = isinstance(node, dict) and part in node
        if in_dict or (isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)):
            out.append(part)
            node = node[part]
        elif isinstance(node, dict) and isinstance(part, str) and not part[:1].isupper() and "[" not in part:
            out.append(part)  # a missing key: name it
            node = None
    return out


def _dotted(path: Sequence[Any]) -> str:
    s = ""
    for part in path:
        part = part if isinstance(part, int) else excerpt(str(part), limit=40, quote=False)
        s += f"[{part}]" if isinstance(part, int) else (f".{part}" if s else str(part))
    return s


def validation_lines(
    exc: ValidationError,
    *,
    model: type[BaseModel],
    data: dict[str, Any],
    file: Path | str,
    position: typing.Callable[[tuple[Any, ...]], tuple[int, int]],
    prefix: tuple[Any, ...] = (),
) -> list[str]:
    """One line per pydantic error, with unknown keys suggesting the closest valid key.

    A misspelt required key gives one line, not two: the 'missing' error it causes is dropped
    when an unknown key next to it is the likely spelling.
    """
    errors = exc.errors(include_url=False)
    unknown: dict[tuple[Any, ...], list[str]] = {}
    for err in errors:
        if err["type"] == "extra_forbidden":
            path = _data_path(err["loc"], data)
            unknown.setdefault(tuple(path[:-1]), []).append(str(path[-1]))
    lines: list[str] = []
    for err in errors:
        path = _data_path(err["loc"], data)
        full = prefix + tuple(path)
        if err["type"] == "extra_forbidden":
            parent, key = path[:-1], str(path[-1])
            keys = valid_keys(model, parent) or []
            close = difflib.get_close_matches(key, keys, n=1, cutoff=0.6) if len(key) <= 100 else []
            hint = f"; did you mean {close[0]!r}?" if close else ""
            lines.append(format_line(file, position(full), _dotted(full),
                                     f"unknown key {excerpt(key)}{hint} (valid: {', '.join(keys)})"))
            continue
        if err["type"] == "missing":
            parent_loc, key = tuple(path[:-1]), str(path[-1])
            near = [k for k in unknown.get(parent_loc, []) if len(k) <= 100]
            if any(difflib.get_close_matches(key, near, n=1, cutoff=0.6)):
                continue
            lines.append(format_line(file, position(prefix + parent_loc), _dotted(full), "required field is missing"))
            continue
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] not in ("value_error", "assertion_error") and "input" in err:
            message += f" (got {excerpt(err['input'])})"
        lines.append(format_line(file, position(full), _dotted(full), message))
    return lines or [format_line(file, position(prefix), "", str(exc).splitlines()[0])]
