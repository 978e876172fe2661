"""Triage fixtures: a pasted text with its expected verdict marked in the file, as the log classifier keeps rules.

A fixture (``fixtures/triage/*``) is the text as people pasted it, under a header of ``# key: value`` lines::

    # source: https://github.com/sgl-project/sglang/issues/28264
    # title: [Bug] ... output with shape [1] doesn't match the broadcast shape [276]
    # expect: frozen-kv-mtp-stale-out-cache-loc:probable
    # line: 19
    # fixed: 0.5.13.post1 lack the fix

``expect`` is ``ID:LEVEL`` (or ``none``), ``line`` the 1-based line of the file that decided (a traceback's
exception line or last frame, a message's line; 0: the title), ``note`` what was cut or completed, ``fixed``
a part of what the version verdict must say. ``title`` and ``version`` are what ``--title`` and ``--version``
would give. The header is blanked before judging, so line numbers are the file's. ``triage --bless`` writes
one; ``UPDATE_FIXTURES=1`` rewrites the ``expect``/``line`` of each to what triage says now (re-bless after a
deliberate change, then review the diff).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from harness.triage.levels import LEVELS, Level
from harness.util.atomic import write_atomic
from harness.util.bounded_read import read_text
from harness.util.errors import UserError

__all__ = ["TriageFixture", "parse_expect", "read_fixture", "render_fixture", "rewrite_expectation", "split_header"]

_HEADER = re.compile(r"^# (source|note|title|version|expect|line|fixed): (.*)$")
_KEYS = ("source", "note", "title", "version", "expect", "line", "fixed")


@dataclass(frozen=True)
class TriageFixture:
    path: Path
    source: str
    expect: str | None  # signature id; None: no entry at any level
    level: Level
    line: int | None
    title: str | None
    version: str | None
    fixed: str | None
    text: str  # the file with its header lines blanked


def parse_expect(text: str, where: str) -> tuple[str | None, Level]:
    """``ID[:LEVEL]`` (level default confirmed) or ``none``."""
    if text.strip() == "none":
        return None, "none"
    sig, _, level = text.strip().partition(":")
    level = level or "confirmed"
    if level not in LEVELS[1:] or not re.fullmatch(r"[a-z0-9][a-z0-9-]*", sig):
        raise UserError(f"{where}: expect: {text!r} is not valid; use ID[:LEVEL] with LEVEL one of "
                        f"{', '.join(LEVELS[1:])}, or none")
    return sig, level


def split_header(text: str) -> tuple[dict[str, str], str]:
    """A fixture's header fields and its text with the header lines blanked (line numbers kept); a text that does
    not open with ``# source: https://...`` has no header."""
    if not text.startswith("# source: https://"):
        return {}, text
    lines = text.split("\n")
    fields: dict[str, str] = {}
    n = 0
    while n < len(lines) and (m := _HEADER.match(lines[n])) is not None:
        fields[m.group(1)] = m.group(2).strip()
        n += 1
    return fields, "\n".join([""] * n + lines[n:])


def read_fixture(path: Path) -> TriageFixture:
    fields, text = split_header(read_text(path, "source"))
    for key in ("source", "expect"):
        if key not in fields:
            raise UserError(f"{path}:1: missing '# {key}: ...' header line (a fixture needs source and expect)")
    if not fields["source"].startswith("https://"):
        raise UserError(f"{path}:1: source: expected the https:// URL the text was copied from")
    sig, level = parse_expect(fields["expect"], str(path))
    line = fields.get("line")
    if line is not None and not line.isdigit():
        raise UserError(f"{path}: line: {line!r} is not a line number")
    return TriageFixture(path, fields["source"], sig, level, int(line) if line is not None else None,
                         fields.get("title"), fields.get("version"), fields.get("fixed"), text)


def render_fixture(body: str, *, source: str, expect: str, line: int | None, title: str | None = None,
                   version: str | None = None, fixed: str | None = None, note: str | None = None) -> str:
    """A fixture's text: the header, then ``body`` as pasted."""
    header = {"source": source, "note": note, "title": title, "version": version, "expect": expect,
              "line": None if line is None else str(line), "fixed": fixed}
    for key in _KEYS:
        value = header[key]
        if value is not None and not value.isprintable():
            # a newline in --title would start a line of its own: a forged '# expect:' or '# fixed:'
            raise UserError(f"--{key}: {value[:60]!r}: a header value is one line of printable text")
    head = [f"# {k}: {header[k]}" for k in _KEYS if header[k] is not None]
    return "\n".join(head) + "\n" + body


def rewrite_expectation(path: Path, expect: str, line: int | None) -> None:
    """Replace the ``expect`` and ``line`` header lines of a fixture, keeping everything else byte for byte."""
    lines = read_text(path, "source").split("\n")
    n = 0
    while n < len(lines) and _HEADER.match(lines[n]):
        n += 1
    head = [x for x in lines[:n] if not x.startswith(("# expect: ", "# line: "))]
    head.append(f"# expect: {expect}")
    if line is not None:
        # ``line`` counts the old header's lines; the body moves by as many lines as the header grew
        head.append(f"# line: {line + len(head) + 1 - n if line > 0 else 0}")
    write_atomic(path, "\n".join(head + lines[n:]))
