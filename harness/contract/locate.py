"""Where a citation is in one release: ``holds`` / ``moved`` / ``changed`` / ``gone``, by anchor text and function.

A citation (:class:`harness.contract.facts.Cite`) names its text and, through its line in a cited release
(0.5.14, 0.5.15), the function that line sits in (its *anchor*, read from that release's own source). In any
release it is then one of:

- ``holds``: the text is on the line of the *reference* release (the release itself when cited, else the nearer
  cited one: 0.5.14 for older releases, 0.5.15 for newer), or absent where the reference has it absent;
- ``moved``: the same text (or its recorded later wording, :class:`harness.contract.facts.Later`) elsewhere in the
  file; where it is now is said;
- ``changed``: the text is gone but the function it sat in is still there (what that function now says at the
  same offset is shown), or a text the reference lacks is present;
- ``gone``: neither the text nor its function (or not even the file).

``holds`` and ``moved`` keep a fact usable; ``changed`` and ``gone`` are drift. Nothing here is typed per
release: the lines come from the wheels, read on first use.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import lru_cache

from packaging.version import InvalidVersion, Version

from harness.contract.facts import VERSIONS, Cite, Fact
from harness.contract.sources import Sources, lines_of

__all__ = ["STATUSES", "Located", "defs", "enclosing_function", "fact_status", "function_span", "locate", "reference_of",
           "wordings"]

STATUSES = ("holds", "moved", "changed", "gone")
_DEF = re.compile(r"^(\s*)(?:async\s+)?(def|class)\s+(\w+)")


@dataclass(frozen=True)
class Located:
    """One citation of ``fact`` in one release: its status, the line the reference release has it on (None: the
    reference lacks it), the lines it is on now, its anchor function and, for ``changed``, what is there now."""

    fact: str
    file: str
    text: str
    status: str
    reference: str
    cited: int | None
    found: tuple[int, ...]
    function: str | None
    now: str = ""

    def describe(self) -> str:
        where = f"sglang/{self.file}" + (f":{self.cited}" if self.cited else "")
        anchor = f" in {self.function}" if self.function else ""
        if self.status == "holds":
            return f"{self.fact}: holds {where}{anchor}"
        if self.status == "moved":
            return f"{self.fact}: moved {where}{anchor} -> :{', :'.join(map(str, self.found))} {self.text!r}"
        if self.status == "changed":
            return f"{self.fact}: changed {where}{anchor}: lacks {self.text!r}; {self.now}"
        return f"{self.fact}: gone {where}{anchor} {self.text!r}" + (f" ({self.now})" if self.now else "")


def reference_of(version: str) -> str:
    """The cited release whose lines ``version`` is compared with: itself, else the nearer side of the fix."""
    if version in VERSIONS:
        return version
    try:
        v = Version(version)
    except InvalidVersion:
        return VERSIONS[-1]
    return VERSIONS[0] if v < Version(VERSIONS[-1]) else VERSIONS[-1]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


@lru_cache(maxsize=64)
def defs(lines: tuple[str, ...]) -> tuple[tuple[str, int, int], ...]:
    """Every def and class of a file as (qualified name, first line, last line), 1-based, in one pass: a block
    ends at the next line indented no deeper than its header (comments and closing brackets open no block)."""
    spans: list[tuple[str, int, int]] = []
    stack: list[tuple[int, str, int]] = []  # (indent, qualified name, first line)
    for i, line in enumerate(lines, start=1):
        stripped = line.lstrip()
        if not stripped or stripped.startswith(("#", ")", "]", "}")):
            continue
        indent = len(line) - len(stripped)
        while stack and indent <= stack[-1][0]:
            top = stack.pop()
            spans.append((top[1], top[2], i - 1))
        match = _DEF.match(line)
        if match:
            qual = f"{stack[-1][1]}.{match.group(3)}" if stack else match.group(3)
            stack.append((indent, qual, i))
    spans.extend((name, start, len(lines)) for _, name, start in stack)
    return tuple(spans)


def enclosing_function(lines: tuple[str, ...], lineno: int) -> str | None:
    """The qualified name (``Class.method``) of the innermost def or class holding line ``lineno`` (1-based);
    None at module level."""
    inner = [(start, name) for name, start, end in defs(lines) if start < lineno <= end]
    return max(inner)[1] if inner else None


def function_span(lines: tuple[str, ...], qualname: str) -> tuple[int, int] | None:
    """The first and last line (1-based) of the def ``qualname`` in ``lines``; None where there is none."""
    return next(((start, end) for name, start, end in defs(lines) if name == qualname), None)


def _nearest(lines: tuple[str, ...], span: tuple[int, int], text: str) -> tuple[int, str] | None:
    """The line of ``span`` most like ``text`` (what the function says instead), if any is close."""
    body = [line.strip() for line in lines[span[0] - 1:span[1]]]
    close = difflib.get_close_matches(text.strip(), body, n=1, cutoff=0.6)
    return (span[0] + body.index(close[0]), close[0]) if close else None


def wordings(cite: Cite, version: str) -> list[tuple[str, str | None]]:
    """(file, text) the citation may take in ``version``: its own, then each later wording ``version`` reached; a
    text of None first means "recorded absent in ``version``"."""
    forms: list[tuple[str, str | None]] = [(cite.file, cite.text)]
    try:
        v = Version(version)
    except InvalidVersion:
        v = None
    # with no version to go by, any recorded wording may hold, and nothing is taken as absent
    for later in cite.later:
        if (v is None and later.text is not None) or (v is not None and Version(later.since) <= v):
            forms.insert(0, (later.file or cite.file, later.text))
    for earlier in cite.earlier:
        if (v is None and earlier.text is not None) or (v is not None and v <= Version(earlier.until)):
            forms.insert(0, (earlier.file or cite.file, earlier.text))
    return forms


def locate(fact: Fact, cite: Cite, sources: Sources, version: str, reference: Sources | None) -> Located:
    """Where ``cite`` is in ``sources`` (release ``version``); ``reference``: the reference release's sources
    (for the anchor function), None when they cannot be read (then a missing text is ``gone``, its function unknown)."""
    ref = reference_of(version)
    cited = cite.line(ref)
    ref_lines = lines_of(reference, cite.file) if reference is not None else None
    function = enclosing_function(ref_lines, cited) if ref_lines is not None and cited else None
    forms = wordings(cite, version)
    absent = forms[0][1] is None  # recorded absent in this release (Later/Earlier with no text)
    # what is looked for in this release (reported): its own wording where one was recorded, else the cite's text
    def at(status: str, found: tuple[int, ...] = (), now: str = "") -> Located:
        return Located(fact=fact.name, file=forms[0][0], text=cite.text if absent else str(forms[0][1]),
                       status=status, reference=ref, cited=cited, found=found, function=function, now=now)

    hits: list[tuple[str, tuple[int, ...]]] = []
    for file, text in forms:
        lines = lines_of(sources, file)
        if lines is not None and text is not None:
            hits.append((file, tuple(i + 1 for i, line in enumerate(lines) if text in line)))
    found = next((lines for _, lines in hits if lines), ())
    if absent:  # recorded absent here: absent holds, present is a change nobody recorded
        if not found:
            return at("holds")
        return at("changed", found, f"present at :{', :'.join(map(str, found))}, recorded absent in {version}")
    if cited is None:  # the reference release lacks it (a version-specific citation: the fix marker)
        if not found:
            return at("holds")
        return at("changed", found, f"present at :{', :'.join(map(str, found))}, which {ref} lacks")
    if found:
        own_text = lines_of(sources, cite.file) or ()
        at_cited = cited <= len(own_text) and cite.text in own_text[cited - 1]
        return at("holds" if at_cited else "moved", found)
    lines = lines_of(sources, cite.file)
    if lines is None:
        return at("gone", now="no such file")
    span = function_span(lines, function) if function else None
    if span is None or ref_lines is None or function is None:
        return at("gone")
    near = _nearest(lines, span, cite.text)
    instead = f"closest there: :{near[0]} {near[1]!r}" if near else "nothing there is close"
    return at("changed", now=f"{function} is at :{span[0]}-{span[1]}; {instead}")


def fact_status(located: list[Located]) -> str:
    """A fact's status: its worst citation's (gone > changed > moved > holds)."""
    return max((loc.status for loc in located), key=STATUSES.index, default="holds")
