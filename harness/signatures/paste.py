"""What people paste, made readable as a log: ANSI colour and markdown taken off, one output line per input line.

An issue body or a thread saved as markdown wraps its traceback in fences (```` ``` ````, ``~~~``), quotes it
(``> ``), folds it in ``<details>``, and indents all of that inside list items. None of it is the log, and a
closing fence would otherwise end a traceback as if it were the exception line. Every line is kept (blanked
when it is only markup), so a line number still points into the file a person has open.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["ELISION", "normalise"]

# CSI sequences (colours, cursor moves) and OSC sequences (titles, hyperlinks), as terminals and CI logs carry them.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?:>[ \t]?)*(?P<fence>```+|~~~+)")
_QUOTE = re.compile(r"^[ \t]*(?:>[ \t]?)+")
_HTML_ONLY = re.compile(r"^\s*(?:</?(?:details|summary|pre|code|br|p|div)\b[^>]*>\s*)+$", re.IGNORECASE)
_SUMMARY = re.compile(r"</?(?:summary|details|pre|code|br)\b[^>]*>", re.IGNORECASE)
# A line a person put where they cut frames out. Indented, it stays inside the traceback (flush left it would
# end it as if it were the exception line); triage then knows the frames around it are not all there.
_ELISION = re.compile(r"^\s*(?:\.{3,}|…|\[\.\.\.\]|\(\.\.\.\)|<\s*(?:snip|truncated)\s*>|\[(?:snip|truncated)\])\s*$",
                      re.IGNORECASE)
ELISION = "    ..."
_MARKUP_HEADS = frozenset("`~>")
_ELISION_HEADS = frozenset(".…[(<")


def normalise(text: str) -> Iterator[str]:
    """The lines of ``text`` without ANSI sequences or markdown markup; as many lines as ``text`` has (yielded one
    at a time: a long log is not copied into a list)."""
    fence_indent: int | None = None
    for line in _lines(text):
        line = line.rstrip("\r")
        if "\x1b" in line:
            line = _ANSI.sub("", line)
        head = line.lstrip()[:1]
        # cheap tests first: a server log's line is none of this, and a long log has millions of them
        if head in _MARKUP_HEADS:
            fence = _FENCE.match(line)
            if fence is not None:
                # a fence opens or closes a block; inside, lines lose the fence's own indentation (a list item's)
                fence_indent = None if fence_indent is not None else len(fence.group("indent").expandtabs())
                yield ""
                continue
            if head == ">":
                line = _QUOTE.sub("", line, count=1)
        if fence_indent:
            strip = min(fence_indent, len(line) - len(line.lstrip(" ")))
            line = line[strip:]
        if head in _ELISION_HEADS and _ELISION.match(line):
            yield ELISION
            continue
        if "<" in line:
            if _HTML_ONLY.match(line):
                yield ""
                continue
            if fence_indent is None:
                line = _SUMMARY.sub("", line)  # "<summary>RuntimeError: ...</summary>": the words are the point
        yield line


def _lines(text: str) -> Iterator[str]:
    """``text.split("\\n")`` one line at a time: a long log is not held twice."""
    start = 0
    while True:
        end = text.find("\n", start)
        if end == -1:
            yield text[start:]
            return
        yield text[start:end]
        start = end + 1
