"""The decisive part of a crash's traceback and the server log's last lines.

Decisive: the traceback's first line, the frames the catalogue's signature matched (each ``File`` line with its code
line: triage's evidence says which lines those are), the raising frame, and the exception line; the lines between
are elided as ``...``. For a crash no signature explains, the first frame, the last three and the exception line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.records.run_record import RunRecord
from harness.signatures.catalogue import Catalogue, last_traceback
from harness.util.bounded_read import ReadRefused, read_tail

__all__ = ["Evidence", "decisive_lines", "evidence_of"]

_FILE = re.compile(r'^\s*File "')
_MARKERS = re.compile(r"^\s*[~^]+\s*$")
ELIDED = "    ..."
TAIL_LINES = 40
_WINDOW = 8 << 20


@dataclass(frozen=True)
class Evidence:
    traceback: str  # the decisive part ("" when the run shows none)
    traceback_full: str  # the whole traceback, for the attachments
    tail: str  # the log's last lines
    log: str  # the whole log (its last 8 MB), for the attachments
    matched: int  # how many of the signature's frames the traceback shows (0: no signature)


def _frame_pairs(block: Sequence[str], indices: set[int]) -> set[int]:
    """Each evidenced line with its partner: a File line's code line after it, a code line's File line before it."""
    keep: set[int] = set()
    for i in indices:
        if _FILE.match(block[i]):
            keep.add(i)
            if i + 1 < len(block) and not _FILE.match(block[i + 1]):
                keep.add(i + 1)
        else:
            keep.add(i)
            if i > 0 and _FILE.match(block[i - 1]):
                keep.add(i - 1)
    return keep


def decisive_lines(block: Sequence[str], evidenced: set[int]) -> list[str]:
    """``block`` (a traceback, first line to exception line) cut to its decisive lines, gaps elided."""
    if not block:
        return []
    files = [i for i, line in enumerate(block) if _FILE.match(line)]
    keep = {0, len(block) - 1}
    if files:
        keep |= _frame_pairs(block, {files[-1]})  # the raising frame
        if not evidenced:
            keep |= _frame_pairs(block, {files[0], *files[-3:]})
    keep |= _frame_pairs(block, evidenced)
    # Python 3.11's position markers under a code line (^^^^, ~~~^^^) are part of their frame: leaving them out
    # is no elision
    marks = {i for i, line in enumerate(block) if _MARKERS.match(line)}
    out: list[str] = []
    last = -1
    for i in sorted(keep):
        if last >= 0 and any(j not in marks for j in range(last + 1, i)):
            out.append(ELIDED)
        out.append(block[i])
        last = i
    return out


def _read_log(run_dir: Path | None) -> str:
    if run_dir is None:
        return ""
    try:
        data = read_tail(run_dir / "server.log", "log", _WINDOW)  # the whole log when it is smaller
    except (ReadRefused, OSError):
        return ""
    return data.decode("utf-8", errors="replace")


def evidence_of(record: RunRecord, run_dir: Path | None, catalogue: Catalogue) -> Evidence:
    from harness.triage import judge_text

    log = _read_log(run_dir)
    text = log or record.excerpt
    tail = "\n".join(text.splitlines()[-TAIL_LINES:])
    findings = [f for f in judge_text(text, catalogue) if f.block] if text else []
    best = next((f for f in findings if f.signature is not None and f.signature.id == record.signature), None)
    if best is None and findings:
        best = findings[-1]
    if best is not None and best.best is not None and best.best.evidence is not None:
        hits = {h.index for h in best.best.evidence.hits if h.index is not None}
        block = list(best.block)
        return Evidence("\n".join(decisive_lines(block, hits)), "\n".join(block), tail, log, len(hits))
    found = last_traceback(text) if text else None
    if not found:
        return Evidence("", "", tail, log, 0)
    block = found.splitlines()
    return Evidence("\n".join(decisive_lines(block, set())), found, tail, log, 0)
