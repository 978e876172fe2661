"""A scenario's flags in a build's own words: a flag the build deprecates is written as its replacement.

SGLang registers a deprecated flag with a ``Deprecated*Action`` naming its replacement (``new_flag=``), e.g.
``--disable-cuda-graph`` from 0.5.14 on: "will be removed in a future release. Use
'--cuda-graph-backend-{decode,prefill}=disabled' instead." (server_args.py 0.5.14 :6375-6380, 0.5.23 :410-415;
up to 0.5.13.post1 a plain store_true, and the per-phase flags do not exist). Where the build's profile
(:mod:`harness.contract.profile`) names such a flag and its replacement, a scenario's use of it is rewritten
into the replacement (one brace group expanded: ``--x-{a,b}=v`` -> ``--x-a v --x-b v``), and a note names the
deprecation and where the build says so, for pre-flight to log and the run record to keep.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from harness.contract.profile import BuildProfile

__all__ = ["Rendered", "in_build_words", "expand_replacement"]

_BRACES = re.compile(r"^--([a-z0-9-]*)\{([a-z0-9,-]+)\}([a-z0-9-]*)(?:=(\S+))?$")
_PLAIN = re.compile(r"^--([a-z0-9-]+)(?:=(\S+))?$")


@dataclass(frozen=True)
class Rendered:
    """The scenario's server args as the build takes them, and one note per flag rewritten."""

    args: dict[str, object]
    notes: tuple[str, ...]


def expand_replacement(replacement: str) -> list[tuple[str, str | None]] | None:
    """``--cuda-graph-backend-{decode,prefill}=disabled`` -> [(cuda-graph-backend-decode, disabled), ...];
    ``--x`` -> [(x, None)]; None for a replacement in words this cannot read (left as it is)."""
    text = replacement.strip()
    match = _BRACES.match(text)
    if match:
        head, options, tail, value = match.groups()
        return [(f"{head}{option}{tail}", value) for option in options.split(",")]
    plain = _PLAIN.match(text)
    return [(plain.group(1), plain.group(2))] if plain else None


def in_build_words(args: Mapping[str, object], profile: BuildProfile) -> Rendered:
    """``args`` (scenario server args, names without ``--``) rewritten where ``profile`` deprecates a flag set."""
    out = dict(args)
    notes: list[str] = []
    for dep in profile.deprecated:
        key = dep.flag[2:]
        if key not in out or out[key] in (None, False) or not dep.replacement:
            continue
        pairs = expand_replacement(dep.replacement)
        if not pairs or any(name in out for name, _ in pairs):
            continue  # unreadable, or the scenario already says it the new way: left alone
        value = out.pop(key)
        for name, new in pairs:
            out[name] = new if new is not None else value
        words = " ".join(f"--{n}" + (f" {v}" if v is not None else "") for n, v in pairs)
        notes.append(f"{dep.flag} is deprecated in sglang {profile.version} ({dep.where}: use {dep.replacement}); "
                     f"rendered as {words}")
    return Rendered(out, tuple(notes))
