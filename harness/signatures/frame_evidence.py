"""Frame evidence: how much of a signature's call path a traceback shows, and whether that is enough.

A signature lists the frames of its crash path, outermost first. Real logs rarely show them all:
they are truncated at the top, lose the raising helper's frame, differ between releases (0.5.14's
``eager_runner.py execute -> _execute_decode -> load_batch`` was ``model_runner.py forward_decode ->
_eager_fb_view`` in 0.5.13.x, the release of #28264's log), or name a call only in the code line under its
caller (``registry.fill_from(`` under ``load_batch``). So each frame is *evidence*:

- a ``File "...<file>.py", line N, in <function>`` line evidences the frame it names;
- a code line (the source printed under a frame) that matches a frame's ``call`` evidences that
  frame as well, because the caller was about to call it.

The rule (a signature's ``evidence``), over one traceback block:

1. ``min``: at least this many frames are evidenced *in order* (the longest in-order chain of
   evidence, so a frame lost or renamed costs one, never the whole match);
2. ``require``: each named tag has at least one evidenced frame in that chain (e.g. ``eager``: the
   eager draft path, which is what the bug needs; ``site``: where the message is raised);
3. the raise site: the innermost line of evidence evidences a ``site`` frame, and every frame
   printed after it is in a ``site`` frame's file. The same message raised by unrelated code (a
   sampler, a custom model) after passing through the bug's outer frames does not match.

A frame given as a plain regex (the old form) is searched in every line of the block; a signature
without ``evidence`` needs every frame, in order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["FILE_LINE", "SITE_TAG", "Evidence", "EvidenceRule", "FrameHit", "FrameSpec", "assess"]

# Python's frame line; the file and function are what a frame spec's patterns are matched against.
FILE_LINE = re.compile(r'^\s*File "(?P<path>[^"]*)", line \d+, in (?P<function>\S+)\s*$')
SITE_TAG = "site"


@dataclass(frozen=True)
class FrameSpec:
    """One frame of a crash path: file basename (without ``.py``) and function regexes, an optional
    regex for a code line that calls it, and tags (``site`` marks where the message is raised)."""

    label: str
    file: re.Pattern[str] | None = None
    function: re.Pattern[str] | None = None
    call: re.Pattern[str] | None = None
    line: re.Pattern[str] | None = None  # the old form: a regex over the whole line
    tags: tuple[str, ...] = ()

    def by_frame_line(self, path: str, function: str) -> bool:
        if self.file is None or self.function is None:
            return False
        stem = path.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".py")
        return self.file.fullmatch(stem) is not None and self.function.fullmatch(function) is not None

    def by_code_line(self, content: str) -> bool:
        return self.call is not None and self.call.search(content) is not None

    def owns_file(self, path: str) -> bool:
        if self.file is None:
            return False
        return self.file.fullmatch(path.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".py")) is not None


@dataclass(frozen=True)
class EvidenceRule:
    """``min`` frames in order (None: all of them), the tags that must be evidenced."""

    min: int | None = None
    require: tuple[str, ...] = ()
    alone: tuple[str, ...] = ()  # tags that must be evidenced for the frames to tell without the message


@dataclass(frozen=True)
class FrameHit:
    """One frame of the signature and where (if anywhere) the chosen chain found it."""

    frame: str
    index: int | None  # 0-based line in the traceback block, None when not evidenced
    via: str | None  # "frame" (its own File line) or "code" (a caller's code line)
    text: str | None


@dataclass(frozen=True)
class Evidence:
    """What a traceback shows of a signature's frames, and the verdict with its reason."""

    hits: tuple[FrameHit, ...]
    needed: int
    ok: bool
    reason: str
    # the frames show the message raised elsewhere (a frame of other code below everything evidenced): only this
    # lowers what the message alone earns; too few frames, or a paste cut above the raise, only fail to confirm
    contradicts: bool = False

    @property
    def found(self) -> int:
        return sum(1 for h in self.hits if h.index is not None)


def _line_evidence(frames: Sequence[FrameSpec], contents: Sequence[str]) -> list[list[tuple[int, str]]]:
    """Per block line: the (frame index, via) pairs that line evidences."""
    out: list[list[tuple[int, str]]] = []
    for content in contents:
        m = FILE_LINE.match(content)
        found: list[tuple[int, str]] = []
        for i, spec in enumerate(frames):
            if spec.line is not None:
                if spec.line.search(content):
                    found.append((i, "frame"))
            elif m is not None:
                if spec.by_frame_line(m.group("path"), m.group("function")):
                    found.append((i, "frame"))
            elif content[:1] in (" ", "\t") and spec.by_code_line(content):
                found.append((i, "code"))
        out.append(found)
    return out


def _longest_chain(per_line: list[list[tuple[int, str]]], n_frames: int) -> list[tuple[int, int, str]]:
    """The longest chain of (line, frame, via) with lines and frames both strictly increasing."""
    n_lines = len(per_line)
    # best[l][f]: longest chain using lines >= l and frames >= f
    best = [[0] * (n_frames + 1) for _ in range(n_lines + 1)]
    for li in range(n_lines - 1, -1, -1):
        hits = {f for f, _ in per_line[li]}
        row, below = best[li], best[li + 1]
        for f in range(n_frames - 1, -1, -1):
            take = 1 + below[f + 1] if f in hits else 0
            row[f] = max(below[f], row[f + 1], take)
    chain: list[tuple[int, int, str]] = []
    li = f = 0
    while li < n_lines and f < n_frames:
        vias = {k: v for k, v in reversed(per_line[li])}
        if f in vias and best[li][f] == 1 + best[li + 1][f + 1]:
            chain.append((li, f, vias[f]))
            li, f = li + 1, f + 1
        elif best[li][f] == best[li + 1][f]:
            li += 1
        else:
            f += 1
    return chain


def _raised_elsewhere(frames: Sequence[FrameSpec], per_line: list[list[tuple[int, str]]],
                      contents: Sequence[str]) -> str | None:
    """Why the traceback shows the message raised by other code, or None: its innermost frame (where it raised) is
    none of the entry's frames and in no file of its raising sites (the sampler's ``logits.div_`` raising the same
    shape message). A paste that stops at one of the entry's own frames shows less, not another raiser; a block with no
    frame, or an entry without raising sites, shows nothing of the kind."""
    sites = [i for i, spec in enumerate(frames) if SITE_TAG in spec.tags]
    innermost = next((i for i in range(len(contents) - 1, -1, -1) if FILE_LINE.match(contents[i])), None)
    if not sites or innermost is None or any(via == "frame" for _, via in per_line[innermost]):
        return None
    found = FILE_LINE.match(contents[innermost])
    assert found is not None
    if any(frames[i].owns_file(found.group("path")) for i in sites):
        return None
    return f"raised in other code: {contents[innermost].strip()}"


def assess(frames: Sequence[FrameSpec], rule: EvidenceRule, contents: Sequence[str]) -> Evidence:
    """Judge one traceback block (prefix-free lines, header first, exception line last)."""
    per_line = _line_evidence(frames, contents)
    chain = _longest_chain(per_line, len(frames))
    by_frame = {f: (li, via) for li, f, via in chain}
    hits = tuple(
        FrameHit(spec.label, *(by_frame[i][0], by_frame[i][1], contents[by_frame[i][0]].strip()))
        if i in by_frame else FrameHit(spec.label, None, None, None)
        for i, spec in enumerate(frames)
    )
    needed = len(frames) if rule.min is None else min(rule.min, len(frames))

    elsewhere = _raised_elsewhere(frames, per_line, contents)

    def verdict(ok: bool, reason: str) -> Evidence:
        if not ok and elsewhere is not None:
            return Evidence(hits=hits, needed=needed, ok=False, reason=elsewhere, contradicts=True)
        return Evidence(hits=hits, needed=needed, ok=ok, reason=reason)

    if len(chain) < needed:
        return verdict(False, f"{len(chain)} of {len(frames)} frames evidenced in order; {needed} needed")
    evidenced_tags = {t for _, f, _ in chain for t in frames[f].tags}
    missing = [t for t in rule.require if t not in evidenced_tags]
    if missing:
        return verdict(False, f"no evidence of the required frame tag(s) {', '.join(missing)}")
    sites = [i for i, spec in enumerate(frames) if SITE_TAG in spec.tags]
    if sites:
        last = max((li for li, found in enumerate(per_line) if found), default=None)
        if last is None or not any(f in sites for f, _ in per_line[last]):
            return verdict(False, "the innermost evidence is not a frame where the message is raised")
        for content in contents[last + 1:]:
            m = FILE_LINE.match(content)
            if m is not None and not any(frames[i].owns_file(m.group("path")) for i in sites):
                return verdict(False, f"raised below the known frames, in unrelated code: {content.strip()}")
    return verdict(True, f"{len(chain)} of {len(frames)} frames evidenced in order (>= {needed})")
