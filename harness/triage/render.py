"""Triage's output: one verdict line per finding with its indented evidence (text), or one object each (json)."""

from __future__ import annotations

import re
from typing import Any

from harness.signatures.catalogue import Catalogue
from harness.signatures.frame_evidence import Evidence, FrameHit
from harness.triage.levels import Candidate
from harness.triage.verdicts import FileVerdict, Group, Judged, frames_label
from harness.util.text import shown

__all__ = ["print_text", "to_json"]


def _say(line: str) -> None:
    """Every line triage prints: a file name or a pasted line holding a newline, an escape sequence, NUL or a bidi
    override is shown as escapes, so it can neither forge a verdict line nor repaint or reorder the terminal."""
    print(shown(line))


def print_text(verdict: FileVerdict, catalogue: Catalogue, *, explain: bool, excerpt: bool) -> None:
    groups = verdict.groups()
    if not groups:
        _say(f"{verdict.path}: none")
        if explain:
            for j in verdict.judged:
                for cand in _near_misses(j):
                    _say(f"  line {j.finding.line_no}: {cand.signature.id} not taken: {'; '.join(cand.missing)}")
                    if cand.evidence is not None:
                        _print_evidence(cand.evidence)
        return
    for group in groups:
        sig = group.signature
        assert sig is not None
        _say(f"{verdict.path}: {sig.id} ({sig.kind}) {sig.title} [{group.level}]{_decided_by(group)}")
        _print_group(group, catalogue, explain=explain, excerpt=excerpt)


def _print_group(group: Group, catalogue: Catalogue, *, explain: bool, excerpt: bool) -> None:
    first = group.members[0]
    best = first.finding.best
    assert best is not None and group.signature is not None
    where = ", ".join(str(m.finding.line_no) if m.finding.line_no else "title" for m in group.members)
    what = {"traceback": "traceback", "cut traceback": "traceback cut before its exception line",
            "line": "line", "title": "title"}[first.finding.source]
    count = f"{len(group.members)} findings, lines" if len(group.members) > 1 else "line"
    _say(f"  {count} {where} ({what}): seen {_summary(best, explain)}")
    if best.missing:
        shown = best.missing if explain else best.missing[:3]
        more = f"; and {len(best.missing) - len(shown)} more" if len(shown) < len(best.missing) else ""
        _say(f"  missing: {'; '.join(shown)}{more}")
    family = catalogue.families.get(group.signature.family or "")
    if family is not None:
        _say(f"  family {family.id} ({family.title}): this is {group.signature.id}; its siblings:")
        for c in first.finding.siblings:
            _say(f"    {c.signature.id}: {c.level}" + (f" ({c.missing[0]})" if c.missing else ""))
    if first.fixed is not None:
        _say(f"  fixed: {first.fixed}")
    if first.fit is not None and first.fit.frames and explain:
        _say(f"  frames fitted to releases: {frames_label(first.fit.frames)}")
    if explain and best.evidence is not None:
        _say(f"  {best.evidence.reason}")
        _print_evidence(best.evidence)
    if excerpt:
        _say(f"  line {first.finding.line_no}:")
        for line in (first.finding.block or (first.finding.line,)):
            _say(f"    {line}")


def _decided_by(group: Group) -> str:
    """What decided the level, on the verdict line itself (a person should not need --explain to see why a paste with
    frames says less or more than its message): the message, and the frames by function that agreed."""
    best = group.members[0].finding.best
    if best is None or not best.signature.frames:
        return ""  # an entry of a message alone: its message decided, as the line below says
    parts = ["its message"] if any(x.startswith("its message") for x in best.seen) else []
    if best.evidence is not None and best.evidence.found:
        names = [_function_of(h) for h in best.evidence.hits if h.index is not None]
        shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
        parts.append(f"{best.evidence.found} of {len(best.evidence.hits)} frames ({shown})")
    return f" by {' and '.join(parts)}" if parts else ""


def _function_of(hit: FrameHit) -> str:
    """A frame as its function's name: the File line's own where the frame printed one, else the entry's label's."""
    found = re.search(r", in (\S+)", hit.text or "") if hit.via == "frame" else None
    return found.group(1) if found is not None else hit.frame.rsplit(" ", 1)[-1]


def _summary(best: Candidate, full: bool) -> str:
    """What was seen: everything with --explain, else the message and the count of frames evidenced."""
    if full or best.evidence is None:
        return "; ".join(best.seen) or "nothing"
    other = [x for x in best.seen if not x.startswith("frame ")]
    frames = f"{best.evidence.found} of {len(best.evidence.hits)} of its frames"
    return "; ".join([*other, frames])


def _near_misses(judged: Judged) -> list[Candidate]:
    return [c for c in _candidates(judged) if c.level == "none" and c.seen]


def _candidates(judged: Judged) -> list[Candidate]:
    f = judged.finding
    return [c for c in (f.best, *f.siblings, *f.rejected) if c is not None]


def _print_evidence(evidence: Evidence) -> None:
    for hit in evidence.hits:
        if hit.index is None:
            _say(f"    - {hit.frame}: not seen")
        else:
            _say(f"    + {hit.frame}: block line {hit.index + 1}, {hit.via} line: {hit.text}")


def to_json(verdict: FileVerdict) -> list[dict[str, Any]]:
    if not verdict.judged:
        return [{"file": str(verdict.path), "line": None, "source": None, "level": "none", "signature": None,
                 "version": verdict.version.version}]
    out = []
    for j in verdict.judged:
        f, best = j.finding, j.finding.best
        sig = f.signature
        out.append({
            "file": str(verdict.path),
            "line": f.line_no,
            "source": f.source,
            "level": f.level,
            "signature": sig.id if sig is not None else None,
            "kind": sig.kind if sig is not None else None,
            "title": sig.title if sig is not None else None,
            "family": sig.family if sig is not None else None,
            "seen": list(best.seen) if best is not None else [],
            "missing": list(best.missing) if best is not None else [],
            "siblings": [{"signature": c.signature.id, "level": c.level, "missing": list(c.missing)}
                         for c in f.siblings],
            "version": verdict.version.version,
            "version_from": verdict.version.where,
            "releases_fitted": list(j.fit.fits) if j.fit is not None else None,
            "fixed": j.fixed,
            "text": f.line,
        })
    return out
