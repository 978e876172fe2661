"""Safe to paste: every text of a report passes here before it is written.

- Secrets: :func:`harness.util.redact.redact_everywhere`, the same redaction as every artifact (secret-named
  variables, ``--api-key`` flags, tokens by shape, this process's secret values).
- Places: home folders (``/home/NAME``, ``/Users/NAME``, ``/root``, this user's ``$HOME``) become ``~`` and the
  run's host names ``<host>``, unless ``--keep-paths``. A host name is replaced only where it stands alone (not
  inside a longer word), so a host called ``vm`` leaves ``vmalloc`` alone.
- Markdown: text from a log goes in a fence longer than any run of backticks inside it, and short text in a code
  span built the same way, so no log line can close it, start a heading or open an HTML block.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from harness.util.redact import redact_everywhere

__all__ = ["Scrubber", "code_span", "fence", "prose"]

_HOMES = re.compile(r"(?<![\w/])(?:/home/[^/\s\"'`]+|/Users/[^/\s\"'`]+|/root)(?=/|\b|$)")
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", ""})


@dataclass(frozen=True)
class Scrubber:
    keep_paths: bool = False
    hostnames: tuple[str, ...] = ()
    secrets: tuple[str, ...] = field(default=())  # values known to be secret beyond what redaction finds itself

    @classmethod
    def for_hosts(cls, hostnames: Iterable[str], *, keep_paths: bool = False) -> Scrubber:
        names = {h.strip() for h in hostnames if h and h.strip() not in _LOCAL_HOSTS}
        names |= {n.split(".", 1)[0] for n in names if "." in n}  # the short name of an FQDN too
        return cls(keep_paths, tuple(sorted(names, key=len, reverse=True)))

    def __call__(self, text: str) -> str:
        text = redact_everywhere(text, self.secrets)
        if self.keep_paths:
            return text
        home = os.path.expanduser("~")
        if home not in ("/", "~") and len(home) > 1:
            text = re.sub(rf"(?<![\w/]){re.escape(home.rstrip('/'))}(?=/|\b|$)", "~", text)
        text = _HOMES.sub("~", text)
        for name in self.hostnames:
            text = re.sub(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", "<host>", text)
        return text


def _longest_run(text: str, ch: str) -> int:
    return max((len(m) for m in re.findall(rf"{re.escape(ch)}+", text)), default=0)


def fence(text: str, info: str = "text") -> str:
    """``text`` as a fenced code block whose fence no line of it can close (longer than any backtick run in it)."""
    marks = "`" * max(3, _longest_run(text, "`") + 1)
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"{marks}{info}\n{body}{marks}"


def code_span(text: str) -> str:
    """``text`` (one line) as an inline code span that survives backticks in it; empty text as ``(none)``."""
    line = " ".join(text.split())
    if not line:
        return "(none)"
    ticks = "`" * (_longest_run(line, "`") + 1)
    pad = " " if line.startswith("`") or line.endswith("`") else ""
    return f"{ticks}{pad}{line}{pad}{ticks}"


_SPECIAL = re.compile(r"([\\`*_\[\]<>|~#!])")


def prose(text: str) -> str:
    """``text`` from a record (a reason, a title) as plain Markdown text: one line, every character that could
    start markup escaped with a backslash (CommonMark's escape for any ASCII punctuation)."""
    return _SPECIAL.sub(r"\\\1", " ".join(text.split()))
