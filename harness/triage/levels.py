"""Evidence levels: how sure a text is to show a catalogue entry, with what was seen and what was missing.

A server log is judged by today's rule (:class:`harness.signatures.catalogue.StreamMatcher`): the message on the
line that ends a traceback whose frames evidence the entry. What people paste into issues is partial: the frames
without the exception line (the message is in the title), the message alone in prose, several tracebacks. So each
traceback, and each line outside one, gets a level for every entry, and the best decides:

- ``confirmed``: the message and the entry's frames in one traceback (today's rule; an entry without frames: its
  message; an entry with ``context``: its message and every context pattern somewhere in the text). A traceback
  cut before its exception line takes the message from ``--title``.
- ``probable``: the entry's frames, including its distinctive ones (``evidence.alone``), in a traceback cut
  before its exception line; or, outside any traceback, a message specific on its own (``message_alone:
  probable``).
- ``possible``: outside any traceback, a generic message (``message_alone: possible``, the default).
- ``none``: nothing; also a traceback whose frames contradict the entry (the message raised by other code), or
  that ends in another error. Frames that agree with an entry without confirming it (too few, a paste cut above
  the raise) never lower the level its message alone earns: only a contradiction does.

Ties go to catalogue order, as in a log. Confirmed findings are exactly the log matcher's matches (a test checks
it on every real-log fixture), so a CI job that fails only on ``confirmed`` fails as before.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from harness.signatures.catalogue import Catalogue, LineEvent, Signature, StreamMatcher
from harness.signatures.frame_evidence import FILE_LINE, Evidence, FrameHit, assess
from harness.signatures.paste import ELISION, normalise

__all__ = ["LEVELS", "Finding", "Level", "judge_text", "rank"]

Level = Literal["none", "possible", "probable", "confirmed"]
LEVELS: tuple[Level, ...] = ("none", "possible", "probable", "confirmed")
Source = Literal["traceback", "cut traceback", "line", "title"]

# An exception line: a (dotted) name ending in Error/Exception/..., or any dotted name followed by ": ".
_FRAME_AT = re.compile(r'^\s*File "(?P<path>[^"]*)", line (?P<line>\d+), in (?P<function>\S+)')
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit|Interrupt|Fault)\b|[A-Za-z_][\w]*(?:\.[\w]+)+: )")


_CLASS_PREFIX = re.compile(r"^\^?(?:[A-Za-z_][\w.]*(?:Error|Exception)): ")


def _loose(sig: Signature) -> re.Pattern[str]:
    """The message without its leading exception class (``RuntimeError: ``), as people quote it."""
    return re.compile(_CLASS_PREFIX.sub("", sig.message.pattern, count=1))


def _seen(hit: FrameHit) -> str:
    """Where a frame was seen, as a person finds it in the text: ``file.py:LINE function`` or a caller's code."""
    m = _FRAME_AT.match(hit.text or "")
    if hit.via == "frame" and m is not None:
        return f"frame {m.group('path').replace(chr(92), '/').rsplit('/', 1)[-1]}:{m.group('line')} {m.group('function')}"
    text = hit.text or ""
    return f"frame {hit.frame} (its caller's line: {text if len(text) <= 60 else text[:57] + '...'})"


def _cut_above_raise(block: Sequence[str]) -> bool:
    """The traceback has an elision (``...``) with no frame printed below it: the raising frames were cut."""
    marks = [i for i, c in enumerate(block) if c == ELISION]
    return bool(marks) and not any(FILE_LINE.match(c) for c in block[marks[-1] + 1:])


def rank(level: Level) -> int:
    return LEVELS.index(level)


@dataclass(frozen=True)
class Candidate:
    """One entry's level for one finding, and why."""

    signature: Signature
    level: Level
    seen: tuple[str, ...]
    missing: tuple[str, ...]
    evidence: Evidence | None = None


@dataclass(frozen=True)
class Finding:
    """One traceback, or one line outside any, and the entry that decided it (None: ``none``)."""

    line_no: int  # 1-based: the exception line, the message's line, or a cut traceback's last line (0: the title)
    source: Source
    line: str  # that line's text, prefix-free
    block: tuple[str, ...]  # the traceback's prefix-free lines; () for a line
    best: Candidate | None
    siblings: tuple[Candidate, ...] = ()  # the other members of the decider's family, each with its level
    rejected: tuple[Candidate, ...] = ()  # entries something was seen of, not taken (for --explain)

    @property
    def level(self) -> Level:
        return self.best.level if self.best is not None else "none"

    @property
    def signature(self) -> Signature | None:
        return self.best.signature if self.best is not None else None


def judge_text(text: str, catalogue: Catalogue, title: str | None = None) -> list[Finding]:
    """Every traceback of ``text`` and every line outside one that shows a message, in line order; the title
    (line 0) first when given and it shows a message."""
    judge = _Judge(catalogue, text, title)
    findings: list[Finding] = []

    def observe(event: LineEvent) -> None:  # judged as read: a long log keeps its findings, not its lines
        findings.extend(judge.event(event))

    matcher = StreamMatcher((), observer=observe)  # its reading of tracebacks only; judging is the _Judge's
    for line in normalise(text):
        matcher.feed(line)
    matcher.flush()
    findings.sort(key=lambda f: f.line_no)  # a cut traceback is told when the next one starts
    if title:
        found = judge.line(0, title, "title")
        if found is not None:
            findings.append(found)  # last: at the same level, what the text itself shows decides
    return findings


class _Judge:
    def __init__(self, catalogue: Catalogue, text: str, title: str | None) -> None:
        self.catalogue = catalogue
        self.signatures = catalogue.signatures
        self.text = text
        self.title = title
        self.loose = {sig.id: _loose(sig) for sig in self.signatures}  # by id: hashing a Signature is not cheap
        self._searches = [(sig, sig.message.search, self.loose[sig.id].search if sig.frames else None)
                          for sig in self.signatures]

    def event(self, event: LineEvent) -> list[Finding]:
        if event.block is None:
            found = self.line(event.line_no, event.content, "line")
            return [found] if found is not None else []
        if event.cut:
            return [self.traceback(event.line_no, event.block, None)]
        *frames, last = event.block
        if not any(FILE_LINE.match(c) for c in frames):
            found = self.line(event.line_no, last, "line")  # a header and a message: no frames to judge
            return [found] if found is not None else []
        if self._is_exception(last):
            return [self.traceback(event.line_no, event.block, last)]
        # prose after a pasted traceback ended it: the traceback was cut before its exception line
        out = [self.traceback(event.before or event.line_no - 1, tuple(frames), None)]
        found = self.line(event.line_no, last, "line")
        return out + ([found] if found is not None else [])

    def _is_exception(self, content: str) -> bool:
        return _EXCEPTION.match(content) is not None or any(s.message.search(content) for s in self.signatures)

    def line(self, line_no: int, content: str, source: Source) -> Finding | None:
        # the searches first, bound once: a long log is millions of lines and nearly none shows a message
        shown = [sig for sig, strict, loose in self._searches if strict(content) or (loose and loose(content))]
        if not shown:
            return None
        candidates = [c for c in (self._by_message(sig, content) for sig in shown) if c is not None]
        if not candidates:
            return None
        return self._finding(line_no, source, content, (), candidates)

    def traceback(self, line_no: int, block: tuple[str, ...], exception: str | None) -> Finding:
        candidates = [self._by_traceback(sig, block, exception) for sig in self.signatures]
        line = exception if exception is not None else block[-1].strip()
        return self._finding(line_no, "traceback" if exception is not None else "cut traceback", line, block,
                             [c for c in candidates if c is not None])

    def _finding(self, line_no: int, source: Source, line: str, block: tuple[str, ...],
                 candidates: Sequence[Candidate]) -> Finding:
        ranked = [c for c in candidates if c.level != "none"]
        best = max(ranked, key=lambda c: rank(c.level), default=None)  # max keeps the first: catalogue order
        siblings: tuple[Candidate, ...] = ()
        if best is not None and best.signature.family is not None:
            by_id = {c.signature.id: c for c in candidates}
            siblings = tuple(
                by_id.get(s.id) or Candidate(s, "none", (), ("neither its message nor its frames",))
                for s in self.signatures if s.family == best.signature.family and s.id != best.signature.id
            )
        sibling_ids = {c.signature.id for c in siblings}
        rejected = tuple(c for c in candidates if c.level == "none" and c.signature.id not in sibling_ids)
        return Finding(line_no, source, line, block, best, siblings, rejected)

    # -- one entry ---------------------------------------------------------------------------------

    def _context(self, sig: Signature) -> tuple[list[str], list[str]]:
        seen = [p.pattern for p in sig.context if p.search(self.text) or (self.title and p.search(self.title))]
        return seen, [p.pattern for p in sig.context if p.pattern not in seen]

    def _by_message(self, sig: Signature, content: str) -> Candidate | None:
        found = sig.message.search(content)
        if found is None and sig.frames:
            found = self.loose[sig.id].search(content)  # prose and titles quote the message without its exception class
        if found is None:
            return None
        if sig.context:
            seen, missing = self._context(sig)
            if missing:
                return Candidate(sig, "none", ("its message", *(f"context /{p}/" for p in seen)),
                                 tuple(f"context /{p}/" for p in missing))
            return Candidate(sig, "confirmed", ("its message", *(f"context /{p}/" for p in seen)), ())
        if not sig.frames:
            return Candidate(sig, "confirmed", ("its message",), ())
        return Candidate(sig, sig.message_alone, ("its message",), ("a traceback with its frames",))

    def _by_traceback(self, sig: Signature, block: tuple[str, ...], exception: str | None) -> Candidate | None:
        if not sig.frames:
            return self._by_message(sig, exception) if exception is not None else None
        if exception is not None and _cut_above_raise(block):
            # frames elided down to the exception line: what is left neither shows nor contradicts the entry
            found = self._by_message(sig, exception)
            if found is not None:
                return Candidate(sig, found.level, (*found.seen, "a traceback cut (...) above where it raised"),
                                 found.missing)
            return None
        in_line = exception is not None and sig.message.search(exception) is not None
        in_title = exception is None and bool(self.title) and self.loose[sig.id].search(self.title or "") is not None
        evidence = assess(sig.frames, sig.evidence, block)
        frames_seen = tuple(_seen(h) for h in evidence.hits if h.index is not None)
        frames_missing = tuple(f"frame {h.frame}" for h in evidence.hits if h.index is None)
        if not evidence.ok:
            if not in_line and not in_title and not frames_seen:
                return None
            if (in_line or in_title) and not evidence.contradicts:
                # monotone in evidence: frames that agree but do not confirm keep what the message alone earns
                alone = self._by_message(sig, exception if in_line and exception is not None else self.title or "")
                if alone is not None and alone.level != "none":
                    return Candidate(sig, alone.level, ("its message", *frames_seen),
                                     (f"frames enough to confirm it: {evidence.reason}",), evidence)
            why = ("the message, but " if in_line or in_title else "") + f"the frames do not show it: {evidence.reason}"
            return Candidate(sig, "none", ("its message",) * (in_line or in_title) + frames_seen,
                             (why,), evidence)
        if in_line:
            return Candidate(sig, "confirmed", ("its message on the exception line", *frames_seen), frames_missing,
                             evidence)
        if in_title:
            return Candidate(sig, "confirmed", ("its message in the title (the paste has no exception line)",
                                                *frames_seen), frames_missing, evidence)
        if exception is not None:
            return Candidate(sig, "none", frames_seen, (f"its message: the traceback ends in another error: "
                                                        f"{exception.strip()[:120]}",), evidence)
        evidenced = {t for h, spec in zip(evidence.hits, sig.frames, strict=True) if h.index is not None
                     for t in spec.tags}
        lacking = [t for t in sig.evidence.alone if t not in evidenced]
        if lacking:
            return Candidate(sig, "none", frames_seen,
                             (f"the message, and without it the distinctive frames ({', '.join(lacking)})",), evidence)
        return Candidate(sig, "probable", frames_seen, ("its message (the traceback is cut before its exception "
                                                        "line)", *frames_missing), evidence)
