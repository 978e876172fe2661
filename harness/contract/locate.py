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
import textwrap
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from packaging.version import InvalidVersion, Version

from harness.contract.facts import FILE_MOVES, VERSIONS, Cite, Fact, needs
from harness.contract.sources import Sources, lines_of

__all__ = ["STATUSES", "Located", "defs", "enclosing_function", "fact_status", "function_span", "locate", "reference_of",
           "wordings"]

STATUSES = ("holds", "moved", "changed", "gone")
_DEF = re.compile(r"^(\s*)(?:async\s+)?(def|class)\s+(\w+)")


@dataclass(frozen=True)
class Located:
    """One citation of ``fact`` in one release: its status, the line the reference release has it on (None: the
    reference lacks it, or the release is recorded without it), the lines it is on now (in ``file``), its anchor
    function (in ``cited_file``, the reference's file, where that differs) and, for ``changed``, what is there now.
    ``reach``: for a fact about what a build does (kind "profile"), whether a Frozen-KV MTP draft can reach the
    line it is on now, with the guard that decides it (:mod:`harness.contract.guards`)."""

    fact: str
    file: str
    text: str
    status: str
    reference: str
    cited: int | None
    found: tuple[int, ...]
    function: str | None
    now: str = ""
    cited_file: str = ""
    reach: str = ""

    def describe(self) -> str:
        ref_file = self.cited_file or self.file
        where = f"sglang/{ref_file}" + (f":{self.cited}" if self.cited else "")
        anchor = f" in {self.function}" if self.function else ""
        unreachable = f" [{self.reach}]" if "present-but-unreachable" in self.reach else ""
        if self.status == "holds" and self.cited is None and self.found:
            return f"{self.fact}: holds sglang/{self.file}:{', :'.join(map(str, self.found))} ({self.now}): {self.text!r}"
        if self.status == "holds" and self.cited is None and self.now:
            return f"{self.fact}: holds recorded absent from sglang/{self.file} ({self.now}): {self.text!r}"
        if self.status == "holds":
            return f"{self.fact}: holds {where}{anchor}{unreachable}"
        if self.status == "moved":
            there = f"sglang/{self.file}:" if self.file != ref_file else ":"
            return (f"{self.fact}: moved {where}{anchor} -> {there}{', :'.join(map(str, self.found))} "
                    f"{self.text!r}{unreachable}")
        if self.status == "changed":
            return f"{self.fact}: changed {where}{anchor}: lacks {self.text!r}; {self.now}{unreachable}"
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
    """(file, text) the citation may take in ``version``: its own (in the file its code lived in then,
    :data:`harness.contract.facts.FILE_MOVES`), then each later wording ``version`` reached; a text of None first
    means "recorded absent in ``version``"."""
    try:
        v = Version(version)
    except InvalidVersion:
        v = None
    own = next((m.file for m in FILE_MOVES.get(cite.file, ()) if v is not None and v <= Version(m.until)), cite.file)
    # where the code lived then is looked in first; the cited file stays a last resort (a text found only there is
    # reported where it is)
    forms: list[tuple[str, str | None]] = [(own, cite.text)]
    if own != cite.file:
        forms.append((cite.file, cite.text))
    # with no version to go by, any recorded wording may hold, and nothing is taken as absent
    for later in cite.later:
        if (v is None and later.text is not None) or (v is not None and Version(later.since) <= v):
            forms.insert(0, (later.file or cite.file, later.text))
    for earlier in cite.earlier:
        if (v is None and earlier.text is not None) or (v is not None and v <= Version(earlier.until)):
            forms.insert(0, (earlier.file or own, earlier.text))
    return forms


def _absent_record(cite: Cite, version: str) -> str:
    """In words, the record that says ``cite`` is absent from ``version`` (a Later or Earlier without text)."""
    v = Version(version)
    since = [w.since for w in cite.later if w.text is None and Version(w.since) <= v]
    until = [w.until for w in cite.earlier if w.text is None and v <= Version(w.until)]
    return f"from {since[-1]} on" if since else f"up to {until[-1]}" if until else version


def _present_record(cite: Cite, version: str) -> str | None:
    """The release from which a wording records ``cite`` present, where ``version`` has reached it (None: none)."""
    try:
        v = Version(version)
    except InvalidVersion:
        return None
    since = [w.since for w in cite.later if w.text is not None and Version(w.since) <= v]
    return since[-1] if since else None


_PREMISES: dict[int, tuple[Sources, Any]] = {}


def _premise(sources: Sources) -> Any:
    """One resolver per release for the Frozen-KV MTP draft (a derived flag is followed once per release)."""
    from harness.contract.derived import DERIVED, FROZEN_KV_MTP_DRAFT
    from harness.contract.guards import Resolver

    held = _PREMISES.get(id(sources))
    if held is None or held[0] is not sources:
        if len(_PREMISES) >= 32:
            _PREMISES.clear()
        held = _PREMISES[id(sources)] = (sources, Resolver(sources, FROZEN_KV_MTP_DRAFT, DERIVED))
    return held[1]


def _function_reach(sources: Sources, file: str, lines: tuple[str, ...], line: int) -> Any:
    """The guards of ``file:line`` read from the syntax tree of its innermost function alone (a guard never
    reaches above the function's entry); None at module level or where that function does not parse."""
    from harness.contract.guards import reach_of, tree_of

    inner = [(start, end, name) for name, start, end in defs(lines) if start < line <= end
             and lines[start - 1].lstrip().startswith(("def ", "async def "))]
    if not inner:
        return None
    start, end, name = max(inner)
    tree = tree_of(textwrap.dedent("\n".join(lines[start - 1:end])))
    if tree is None:
        return None
    outer = name.rsplit(".", 1)[0] if "." in name else None
    return reach_of(file, tree, line - start + 1, _premise(sources), offset=start - 1, outer=outer)


@lru_cache(maxsize=256)
def _call_lines(lines: tuple[str, ...], name: str) -> tuple[int, ...]:
    """The lines that call ``name(`` (a def of it excluded), once per file and name."""
    call = re.compile(rf"\b{re.escape(name)}\(")
    return tuple(n for n, text in enumerate(lines, 1) if name in text and call.search(text) and not _DEF.match(text))


def _reach_at(sources: Sources, file: str, lines: tuple[str, ...], line: int) -> Any:
    """:func:`_function_reach`, and where its own guards allow the line, its callers in the same file one level
    up: a function every caller of which is blocked is blocked too (with that caller's guard)."""
    from harness.contract.guards import Reach

    reach = _function_reach(sources, file, lines, line)
    if reach is None or reach.reachable is False or not reach.function:
        return reach
    callers = [c for n in _call_lines(lines, reach.function.rsplit(".", 1)[-1])
               if (c := _function_reach(sources, file, lines, n)) is not None]
    if callers and all(c.reachable is False for c in callers):
        blocked = next(g for g in callers[0].guards if g.holds is False)
        return Reach(reach.line, reach.function, (*reach.guards, blocked))
    return reach


def _reach(fact: Fact, sources: Sources, file: str, found: tuple[int, ...]) -> str:
    """For a fact about what a build does: whether a Frozen-KV MTP draft reaches the text where it is now (the
    first of ``found`` it can reach, else the first), with the guard that decides it."""
    lines = lines_of(sources, file) if found and needs(fact) == "profile" else None
    if lines is None:
        return ""
    reaches = [r for line in found if (r := _reach_at(sources, file, lines, line)) is not None]
    if not reaches:
        return ""
    return str(next((r for r in reaches if r.reachable is not False), reaches[0]).describe(short=True))


def locate(fact: Fact, cite: Cite, sources: Sources, version: str, reference: Sources | None) -> Located:
    """Where ``cite`` is in ``sources`` (release ``version``); ``reference``: the reference release's sources
    (for the anchor function), None when they cannot be read (then a missing text is ``gone``, its function unknown)."""
    ref = reference_of(version)
    cited = cite.line(ref)
    ref_lines = lines_of(reference, cite.file) if reference is not None else None
    function = enclosing_function(ref_lines, cited) if ref_lines is not None and cited else None
    forms = wordings(cite, version)
    absent = forms[0][1] is None  # recorded absent in this release (Later/Earlier with no text)
    hits = [(file, tuple(i + 1 for i, line in enumerate(lines) if text in line)) for file, text in forms
            if text is not None and (lines := lines_of(sources, file)) is not None]
    found_file, found = next(((file, lines) for file, lines in hits if lines), (forms[0][0], ()))

    # what is looked for in this release (reported): its own wording where one was recorded, else the cite's text
    def at(status: str, found: tuple[int, ...] = (), now: str = "", line: int | None = None) -> Located:
        where = found_file if found else forms[0][0]
        return Located(fact=fact.name, file=where, text=cite.text if absent else str(forms[0][1]), status=status,
                       reference=ref, cited=None if absent and not found else cited, found=found,
                       function=None if absent and not found else function, now=now, cited_file=cite.file,
                       reach=_reach(fact, sources, where, (line,) if line else found))

    if absent:  # recorded absent here: absent holds (no line: there is none), present is a change nobody recorded
        if not found:
            return at("holds", now=_absent_record(cite, version))
        return at("changed", found, f"present at :{', :'.join(map(str, found))}, recorded absent in {version}")
    if cited is None:  # the reference release lacks it (a version-specific citation: the fix marker)
        since = _present_record(cite, version)
        if since is not None:  # a text the cited releases lack, recorded present from a later release on
            return at("holds", found, now=f"recorded from {since} on") if found else at(
                "gone", now=f"recorded from {since} on")
        if not found:
            return at("holds")
        return at("changed", found, f"present at :{', :'.join(map(str, found))}, which {ref} lacks")
    if found:
        own_text = lines_of(sources, cite.file) or ()
        at_cited = found_file == cite.file and cited <= len(own_text) and cite.text in own_text[cited - 1]
        return at("holds", found, line=cited) if at_cited else at("moved", found)
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
