"""Crash signatures: the catalogue in ``harness/data/signatures.yaml`` and matching it over server logs.

A signature names one known way a server dies (a product bug or an infrastructure problem). It
matches a log when its ``message`` regex is found in one log line and, if it lists ``frames``,
the Python traceback block that ends at that line carries enough evidence of those frames
(:mod:`harness.signatures.frame_evidence`). The frames are what keep a generic PyTorch message (e.g. a
broadcast-shape error) from being taken for the known bug when other code raised it; they are
evidence, not a template, because real logs are truncated, lose the raising helper's frame,
name a call only in the code line under its caller, and differ between releases.

Logs of real servers are messy, and the matcher copes with three things:

- line prefixes: SGLang's ``[2026-06-29 10:00:00 DP0 ATTN_CP1 TP1] `` (rank tags optional, any of
  ``harness.contract.facts.LOG_RANK_TAGS`` in SGLang's order, or ``encode_server``), container
  runtimes' ``<ISO time> stdout F ``, CI timestamps, ``[rank0]: ``. The prefix is stripped
  before matching; its rank tags say which process wrote the line.
- SGLang logs a scheduler traceback as ONE message: only the first line
  (``... Scheduler hit an exception: Traceback (most recent call last):``) carries the prefix,
  the frames that follow are bare. Other processes may log prefixed lines in between.
- some setups prefix every line of a traceback instead.

So a traceback block is kept per writer (rank tags), and each block learns on its first
continuation line whether it continues with bare or with prefixed lines; lines of the other
form are foreign to it. A block ends at its first non-indented line, the exception line.
Only the current block of each writer is kept, bounded, so watching a live log costs O(1)
memory and a handful of regex searches per line.
"""

from __future__ import annotations

import os
import re
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from harness.signatures.frame_evidence import FILE_LINE, Evidence, EvidenceRule, FrameSpec, assess
from harness.util.errors import UserError
from harness.util.yaml_loaders import SAFE_LOADER

_SAFE_LOADER = SAFE_LOADER  # libyaml's where it bounds nesting (harness.util.yaml_loaders), else PyYAML's

__all__ = [
    "Signature",
    "Match",
    "Catalogue",
    "StreamMatcher",
    "default_catalogue_path",
    "last_traceback",
    "looks_like_crash",
    "TRACEBACK_HEADER",
    "Rejection",
    "LineEvent",
    "Family",
    "Fix",
]

TRACEBACK_HEADER = "Traceback (most recent call last):"

Kind = Literal["bug", "infra"]
_KINDS = ("bug", "infra")
_ID = re.compile(r"[a-z0-9][a-z0-9-]*\Z")
_REQUIRED = ("id", "title", "kind", "upstream", "message")
_OPTIONAL = ("frames", "evidence", "description", "family", "message_alone", "context", "fixed")
_MESSAGE_ALONE = ("probable", "possible")
_FRAME_KEYS = ("file", "function", "call", "tags")
_EVIDENCE_KEYS = ("min", "require", "alone")
_FIXED_KEYS = ("version", "pr")
_FAMILY_KEYS = ("id", "title", "upstream")
_MAX_BLOCK_LINES = 400  # deeper tracebacks keep their innermost frames, which are the ones that matter
_MAX_WRITERS = 64

# SGLang's rank tags (DP0, PP1, ATTN_CP0, MOE_DP1, TP3, EP3: harness.contract.facts.LOG_RANK_TAGS) and the
# encode server's; any upper-case tag with a rank is accepted, so a tag a newer release adds still strips.
_TAG = r"[A-Z][A-Z_]*\d+|encode_dp_worker\[\d+\]|encode_server"

# One log-line prefix; several may be stacked (a CI timestamp around an SGLang line).
_PREFIX = re.compile(
    r"""(?:
        \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?\ (?:(?:stdout|stderr)\ [FP]\ )?  # CRI / CI
      | \[\d{4}-\d\d-\d\d\ \d\d:\d\d:\d\d(?:[.,]\d+)?(?P<tags>(?:\ (?:TAG))*)\]\ ?  # SGLang
      | \[rank(?P<rank>\d+)\]:\ ?                                                                  # torchrun
    )""".replace("TAG", _TAG),
    re.VERBOSE,
)
_CRASH_MARKERS = re.compile(
    r"Traceback \(most recent call last\):|Fatal Python error|Segmentation fault|core dumped"
    r"|terminate called after throwing|CUDA error:|Received sigquit from a child process"
    r"|SIGQUIT received\. .*It usually means one child failed"
)


def default_catalogue_path() -> Path:
    """The built-in catalogue, package data of the harness: ``harness/data/signatures.yaml``."""
    from harness.data import data_path

    return data_path("signatures.yaml")


@dataclass(frozen=True)
class Signature:
    """One catalogue entry, validated and compiled."""

    id: str
    title: str
    kind: Kind
    upstream: tuple[str, ...]
    message: re.Pattern[str]
    frames: tuple[FrameSpec, ...] = ()
    evidence: EvidenceRule = field(default_factory=EvidenceRule)
    description: str = ""
    family: str | None = None  # the id of the family of siblings that share its message, not its cause
    message_alone: Literal["probable", "possible"] = "possible"  # the message without frames: how telling
    context: tuple[re.Pattern[str], ...] = ()  # what else the whole text must show (flags, a kernel's name)
    fixed: Fix | None = None


@dataclass(frozen=True)
class Fix:
    """The first release with the fix, and the change that fixed it."""

    version: str
    pr: str


@dataclass(frozen=True)
class Family:
    """Siblings: catalogue entries with the same message from different root causes."""

    id: str
    title: str
    upstream: tuple[str, ...]


@dataclass(frozen=True)
class Match:
    """Where a signature matched: ``line_no`` is 1-based, ``excerpt`` the traceback block (or the line)."""

    signature: Signature
    line_no: int
    line: str
    excerpt: str
    groups: tuple[str, ...] = ()
    evidence: Evidence | None = None  # what the traceback showed of the signature's frames


@dataclass(frozen=True)
class Rejection:
    """A line whose message matched a signature whose frames the traceback did not evidence enough."""

    signature: Signature
    line_no: int
    line: str
    evidence: Evidence | None  # None: the message stood alone, outside any traceback


class Catalogue:
    """The known crash signatures, in catalogue order (earlier entries win on the same line)."""

    def __init__(self, signatures: Sequence[Signature], source: Path | None = None,
                 families: Sequence[Family] = (), sources: Sequence[Path] = ()) -> None:
        self.families = {f.id: f for f in families}
        self._by_id: dict[str, Signature] = {}
        for sig in signatures:
            if sig.id in self._by_id:
                raise UserError(f"{source or '<catalogue>'}: signature '{sig.id}': duplicate id")
            self._by_id[sig.id] = sig
        self.source = source
        self.sources = tuple(sources) or ((source,) if source is not None else ())  # every file merged, in order

    @classmethod
    def load(cls, path: Path | None = None) -> Catalogue:
        """Load and strictly validate a catalogue file; without one, the built-in catalogue
        (:func:`default_catalogue_path`) merged with the project's own files (``signatures`` of its configuration,
        :mod:`harness.util.project_config`)."""
        if path is not None:
            return cls.merged([Path(path)])
        from harness.util.project_config import project

        return cls.merged([default_catalogue_path(), *project().signatures])

    @classmethod
    def merged(cls, paths: Sequence[Path]) -> Catalogue:
        """The catalogue files in order, each validated alone, as one: an id or family given twice is one line
        naming both places. A later file's signature may belong to an earlier file's family."""
        from harness.util.bounded_read import read_text  # a regular file of a catalogue's size, never a device or FIFO

        signatures: list[Signature] = []
        families: list[Family] = []
        origins: dict[str, str] = {}
        for path in paths:
            if not os.path.lexists(path):
                raise UserError(f"{path}: signature catalogue not found")
            try:
                text = read_text(path, "catalogue")
            except UserError as exc:
                raise UserError(f"{exc} (the signature catalogue)") from None
            found, groups = _parse_catalogue(text, path, origins=origins, known_families=families)
            signatures += found
            families += groups
        return cls(signatures, source=paths[0], families=families, sources=paths)

    @property
    def signatures(self) -> tuple[Signature, ...]:
        return tuple(self._by_id.values())

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(self._by_id)

    def get(self, sig_id: str) -> Signature:
        try:
            return self._by_id[sig_id]
        except KeyError:
            raise KeyError(f"unknown signature id {sig_id!r}; known: {', '.join(self._by_id)}") from None

    def __contains__(self, sig_id: object) -> bool:
        return sig_id in self._by_id

    def __len__(self) -> int:
        return len(self._by_id)

    def stream(self, only: Iterable[str] | None = None) -> StreamMatcher:
        """A matcher to feed a live log line by line (``only``: restrict to these ids)."""
        return StreamMatcher(self._select(only))

    def match_lines(self, lines: Iterable[str], only: Iterable[str] | None = None) -> Match | None:
        """The first match in log order, or None."""
        matcher = self.stream(only)
        for line in lines:
            found = matcher.feed(line)
            if found is not None:
                return found
        return None

    def match_text(self, text: str, only: Iterable[str] | None = None) -> Match | None:
        """The first match in ``text`` in log order, or None."""
        return self.match_lines(text.split("\n"), only)

    def match_file(self, path: Path, only: Iterable[str] | None = None) -> Match | None:
        """Like :meth:`match_text` over a file, streamed (logs can be large); bad bytes are replaced."""
        # binary lines split on b"\n" only, as match_text does: a progress bar's lone "\r" is no new line
        from harness.util.bounded_read import iter_lines  # a regular file, capped, read a bounded line at a time

        return self.match_lines((raw.decode("utf-8", errors="replace") for raw in iter_lines(Path(path), "log")), only)

    def scan_file(self, path: Path, only: Iterable[str] | None = None) -> tuple[Match | None, StreamMatcher]:
        """Like :meth:`match_file`, also returning the matcher (its ``rejected`` near misses explain a miss)."""
        from harness.util.bounded_read import iter_lines  # a regular file, capped, read a bounded line at a time

        matcher = self.stream(only)
        for raw in iter_lines(Path(path), "log"):
            found = matcher.feed(raw.decode("utf-8", errors="replace"))
            if found is not None:
                return found, matcher
        return None, matcher

    def _select(self, only: Iterable[str] | None) -> tuple[Signature, ...]:
        if only is None:
            return self.signatures
        wanted = set(only)
        unknown = sorted(wanted - self._by_id.keys())
        if unknown:
            raise KeyError(f"unknown signature id(s) {', '.join(unknown)}; known: {', '.join(self._by_id)}")
        return tuple(s for s in self._by_id.values() if s.id in wanted)


@dataclass
class _Block:
    """One traceback being read: (raw line, prefix-free content) pairs, header first."""

    lines: deque[tuple[str, str]] = field(default_factory=lambda: deque(maxlen=_MAX_BLOCK_LINES))
    prefixed: bool | None = None  # do continuation lines carry the prefix? learnt from the first one
    last: int = 0  # the 1-based log line last added
    before: int = 0  # the one added before it (a traceback's last frame line, once a line has ended it)

    def text(self) -> str:
        return "\n".join(raw for raw, _ in self.lines)


@dataclass(frozen=True)
class LineEvent:
    """A line matching looks at (``block``: the traceback's prefix-free lines it ended, or None), or with ``cut``
    a traceback that never reached an exception line (``line_no`` its last line; the log, or the paste, ended, or
    the same writer began another)."""

    line_no: int
    raw: str
    content: str
    block: tuple[str, ...] | None
    cut: bool = False
    before: int = 0  # with ``block``: the line of the block's line before ``content``


Observer = Callable[[LineEvent], None]

_INSIDE = _Block()  # sentinel: the line continued a traceback without ending it


class StreamMatcher:
    """Feed log lines one at a time; :meth:`feed` returns a :class:`Match` on a line that matches."""

    def __init__(self, signatures: Sequence[Signature], observer: Observer | None = None) -> None:
        self._signatures = tuple(signatures)
        # triage's reader (harness.signatures.paste) sees every line matching would look at, with the
        # traceback block it ended; matching itself is the same with or without one
        self._observer = observer
        self._open: OrderedDict[str | None, _Block] = OrderedDict()  # writer -> block still being read
        self._current: str | None = None  # writer whose traceback bare lines continue
        self._last: _Block | None = None
        self._line_no = 0
        self.rejected: deque[Rejection] = deque(maxlen=16)  # the latest near misses, for --explain

    @property
    def line_no(self) -> int:
        """Lines fed so far."""
        return self._line_no

    def feed(self, line: str) -> Match | None:
        self._line_no += 1
        raw = line.rstrip("\r\n")
        writer, content = _split_prefix(raw)
        if TRACEBACK_HEADER in content:
            self._start_block(writer, raw, content)
            self._observe(raw, content, None)
            return self._match(raw, content, None)
        ended = self._continue_block(writer, raw, content)
        if ended is _INSIDE:
            return None  # a frame or source line: a quoted message there is not the error itself
        self._observe(raw, content, ended)
        return self._match(raw, content, ended)

    def flush(self) -> None:
        """Tell the observer of each traceback still being read, as cut (call at the end of the text)."""
        for block in self._open.values():
            self._observe_cut(block)
        self._open.clear()

    def _observe(self, raw: str, content: str, ended: _Block | None) -> None:
        if self._observer is not None:
            lines = tuple(c for _, c in ended.lines) if ended is not None else None
            self._observer(LineEvent(self._line_no, raw, content, lines, before=ended.before if ended else 0))

    def _observe_cut(self, block: _Block) -> None:
        if self._observer is not None and block is not _INSIDE:
            self._observer(LineEvent(block.last, "", "", tuple(c for _, c in block.lines), cut=True))

    def last_traceback(self) -> str | None:
        """The most recent traceback block seen (complete or not), raw lines, or None."""
        return self._last.text() if self._last is not None else None

    def _start_block(self, writer: str | None, raw: str, content: str) -> None:
        key = writer if writer is not None else self._current
        block = _Block(last=self._line_no)
        block.lines.append((raw, content))
        replaced = self._open.get(key)
        if replaced is not None:
            self._observe_cut(replaced)
        self._open[key] = block
        self._open.move_to_end(key)
        while len(self._open) > _MAX_WRITERS:
            self._observe_cut(self._open.popitem(last=False)[1])
        self._current = key
        self._last = block

    def _continue_block(self, writer: str | None, raw: str, content: str) -> _Block | None:
        """Add the line to the block it continues; return the block if this line ended it,
        ``_INSIDE`` if the line is inside a traceback, None if it belongs to none."""
        key = self._current if writer is None else writer
        block = self._open.get(key)
        if block is None:
            if FILE_LINE.match(content) is None:
                return None
            # a log cut above its "Traceback" header still shows frames: they open a block of their own
            self._start_block(writer, raw, content)
            self._open[key].prefixed = None
            return _INSIDE
        prefixed = writer is not None
        if block.prefixed is None:
            block.prefixed = prefixed
        elif block.prefixed != prefixed:
            return None  # another writer's line in the middle of this traceback
        if not content.strip():
            return None
        block.lines.append((raw, content))
        block.before, block.last = block.last, self._line_no
        if content[0] in " \t":
            return _INSIDE
        del self._open[key]  # the first non-indented line is the exception line
        return block

    def _match(self, raw: str, content: str, ended: _Block | None) -> Match | None:
        for sig in self._signatures:
            if sig.context:
                continue  # it needs the whole text (triage reads it); one line of a live log cannot tell
            found = sig.message.search(content)
            if found is None:
                continue
            evidence = None
            if sig.frames:
                if ended is None:
                    self.rejected.append(Rejection(sig, self._line_no, raw, None))
                    continue
                evidence = assess(sig.frames, sig.evidence, [c for _, c in ended.lines])
                if not evidence.ok:
                    self.rejected.append(Rejection(sig, self._line_no, raw, evidence))
                    continue
            excerpt = ended.text() if ended is not None else raw
            groups = tuple(g if g is not None else "" for g in found.groups())
            return Match(signature=sig, line_no=self._line_no, line=raw, excerpt=excerpt, groups=groups,
                         evidence=evidence)
        return None



def last_traceback(text: str) -> str | None:
    """The last Python traceback block in ``text`` (raw lines), or None: the ``reason`` of an unknown crash."""
    matcher = StreamMatcher(())
    for line in text.split("\n"):
        matcher.feed(line)
    return matcher.last_traceback()


def looks_like_crash(text: str) -> bool:
    """True when ``text`` shows a Python traceback or a fatal native error."""
    return _CRASH_MARKERS.search(text) is not None


def _split_prefix(raw: str) -> tuple[str | None, str]:
    """(writer, content): writer is the prefix's rank tags ('' when it has none), None without a prefix."""
    writer: str | None = None
    pos = 0
    while True:
        m = _PREFIX.match(raw, pos)
        if m is None or m.end() == pos:
            break
        if m.group("tags") is not None:
            writer = m.group("tags").strip()
        elif m.group("rank") is not None:
            writer = f"rank{m.group('rank')}"
        # a CRI/CI timestamp is transport, not a writer: SGLang's bare traceback lines still carry it
        pos = m.end()
    return writer, raw[pos:]


# -- loading ---------------------------------------------------------------------------------


def _parse_catalogue(text: str, path: Path, *, origins: dict[str, str] | None = None,
                     known_families: Sequence[Family] = ()) -> tuple[list[Signature], list[Family]]:
    """The file's signatures and families, strictly validated; ``origins`` (id -> ``FILE:LINE`` of the files read
    before) refuses an id they already took, and records this file's."""
    origins = {} if origins is None else origins
    try:
        data = yaml.load(text, Loader=_SAFE_LOADER)  # a safe loader: plain types only
        lines = _entry_lines(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        why = " ".join(str(getattr(exc, "problem", None) or exc).split())  # one line, whatever the parser said
        raise UserError(f"{where}: not valid YAML ({why})") from None
    if not isinstance(data, dict) or not {"version", "signatures"} <= set(data) <= {"version", "signatures", "families"}:
        raise UserError(f"{path}: expected a mapping with exactly the keys 'version' (1) and 'signatures' (a list), "
                        "and optionally 'families' (a list)")
    if data["version"] != 1:
        raise UserError(f"{path}: version: {data['version']!r} is not supported; valid: 1")
    entries = data["signatures"]
    if not isinstance(entries, list) or not entries:
        raise UserError(f"{path}: signatures: expected a non-empty list of entries")
    families = _parse_families(data.get("families", []), path)
    for family in families:
        if any(f.id == family.id for f in known_families):
            raise UserError(f"{path}: family '{family.id}': id already in {origins.get('family:' + family.id)}; "
                            "a project's families take ids of their own")
        origins["family:" + family.id] = str(path)
    families_known = {f.id for f in (*known_families, *families)}
    seen: set[str] = set()
    out = []
    for i, entry in enumerate(entries):
        where = f"{path}:{lines[i]}" if i < len(lines) else str(path)
        sig = _parse_entry(entry, i, where)
        if sig.id in seen:
            raise UserError(f"{where}: signature '{sig.id}': duplicate id")
        if sig.id in origins:
            raise UserError(f"{where}: signature '{sig.id}': id already in {origins[sig.id]}; a project's "
                            "signatures take ids of their own")
        if sig.family is not None and sig.family not in families_known:
            raise UserError(f"{where}: signature '{sig.id}': family: {sig.family!r} is not one of the catalogue's "
                            f"families ({', '.join(sorted(families_known)) or 'none'})")
        seen.add(sig.id)
        origins[sig.id] = where
        out.append(sig)
    return out, families


def _parse_families(raw: Any, path: Path) -> list[Family]:
    if not isinstance(raw, list):
        raise UserError(f"{path}: families: expected a list of {{id, title, upstream}}")
    out = []
    for i, item in enumerate(raw):
        label = f"{path}: families[{i}]"
        if not isinstance(item, dict) or set(item) != set(_FAMILY_KEYS):
            raise UserError(f"{label}: expected a mapping with exactly the keys {', '.join(_FAMILY_KEYS)}")
        if not isinstance(item["id"], str) or not _ID.match(item["id"]):
            raise UserError(f"{label}: id: {item['id']!r} is not valid; use lowercase letters, digits, '-'")
        if not isinstance(item["title"], str) or not item["title"].strip():
            raise UserError(f"{label}: title: expected a non-empty string")
        ups = item["upstream"]
        if not isinstance(ups, list) or not all(isinstance(u, str) and u.startswith("https://") for u in ups):
            raise UserError(f"{label}: upstream: expected a list of https:// URLs")
        out.append(Family(item["id"], item["title"].strip(), tuple(ups)))
    return out


def _entry_lines(text: str) -> list[int]:
    """1-based line of each entry of ``signatures``, for error messages (safe_load drops positions)."""
    root = yaml.compose(text, Loader=_SAFE_LOADER)
    if not isinstance(root, yaml.MappingNode):
        return []
    for key, value in root.value:
        if key.value == "signatures" and isinstance(value, yaml.SequenceNode):
            return [item.start_mark.line + 1 for item in value.value]
    return []


def _parse_entry(entry: Any, index: int, where: str) -> Signature:
    if not isinstance(entry, dict):
        raise UserError(f"{where}: signatures[{index}]: expected a mapping with keys {', '.join(_REQUIRED)}")
    sig_id = entry.get("id")
    if not isinstance(sig_id, str) or not _ID.match(sig_id):
        raise UserError(f"{where}: signatures[{index}]: id: {sig_id!r} is not valid; use lowercase letters, digits, '-'")
    label = f"{where}: signature '{sig_id}'"
    unknown = sorted(set(entry) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise UserError(f"{label}: unknown key(s) {', '.join(map(str, unknown))}; valid: {', '.join(_REQUIRED + _OPTIONAL)}")
    missing = [k for k in _REQUIRED if k not in entry]
    if missing:
        raise UserError(f"{label}: missing key(s) {', '.join(missing)}")
    title, kind, upstream = entry["title"], entry["kind"], entry["upstream"]
    if not isinstance(title, str) or not title.strip():
        raise UserError(f"{label}: title: expected a non-empty string")
    if kind not in _KINDS:
        raise UserError(f"{label}: kind: {kind!r} is not valid; valid: {', '.join(_KINDS)}")
    if not isinstance(upstream, list) or not all(isinstance(u, str) and u.startswith("https://") for u in upstream):
        raise UserError(f"{label}: upstream: expected a list of https:// URLs")
    frames = entry.get("frames", [])
    if not isinstance(frames, list) or not frames and "frames" in entry:
        raise UserError(f"{label}: frames: expected a non-empty list of frames (or leave the key out)")
    specs = tuple(_parse_frame(f, f"{label}: frames[{i}]") for i, f in enumerate(frames))
    rule = _parse_evidence(entry.get("evidence"), specs, label)
    description = entry.get("description", "")
    if not isinstance(description, str):
        raise UserError(f"{label}: description: expected a string")
    family = entry.get("family")
    if family is not None and (not isinstance(family, str) or not _ID.match(family)):
        raise UserError(f"{label}: family: expected a family id (lowercase letters, digits, '-')")
    alone = entry.get("message_alone", "possible")
    if alone not in _MESSAGE_ALONE:
        raise UserError(f"{label}: message_alone: {alone!r} is not valid; valid: {', '.join(_MESSAGE_ALONE)}")
    context = entry.get("context", [])
    if not isinstance(context, list) or "context" in entry and not context:
        raise UserError(f"{label}: context: expected a non-empty list of regexes (or leave the key out)")
    if context and frames:
        raise UserError(f"{label}: context: only for an entry without frames (frames are the evidence there)")
    return Signature(
        id=sig_id,
        title=title.strip(),
        kind=kind,
        upstream=tuple(upstream),
        message=_compile(entry["message"], f"{label}: message"),
        frames=specs,
        evidence=rule,
        description=" ".join(description.split()),
        family=family,
        message_alone=alone,
        context=tuple(_compile(c, f"{label}: context[{i}]") for i, c in enumerate(context)),
        fixed=_parse_fixed(entry.get("fixed"), label),
    )


def _parse_fixed(raw: Any, label: str) -> Fix | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) != set(_FIXED_KEYS):
        raise UserError(f"{label}: fixed: expected a mapping with exactly the keys {', '.join(_FIXED_KEYS)}")
    version, pr = raw["version"], raw["pr"]
    from packaging.version import InvalidVersion, Version

    try:
        Version(str(version))
    except InvalidVersion:
        raise UserError(f"{label}: fixed.version: {version!r} is not a release number (e.g. 0.5.15)") from None
    if not isinstance(pr, str) or not pr.startswith("https://"):
        raise UserError(f"{label}: fixed.pr: expected the https:// URL of the change that fixed it")
    return Fix(str(version), pr)


def _compile(pattern: Any, label: str) -> re.Pattern[str]:
    if not isinstance(pattern, str) or not pattern:
        raise UserError(f"{label}: expected a non-empty regex string")
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise UserError(f"{label}: bad regex ({exc})") from None
    if _nested_repeat(pattern):
        # A complexity bound (docs/safety.md): Python's backtracking takes exponential time on such a pattern
        # ("(a+)+$" against 40 a's and a "!" runs for minutes), and a search cannot be given a deadline.
        raise UserError(f"{label}: {pattern[:80]!r} repeats a part that itself repeats without bound (as "
                        "\"(a+)+\" does): a search can take exponential time; write it without the nesting "
                        "(\"a+\" for \"(a+)+\")")
    return compiled


_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")


def _nested_repeat(pattern: str) -> bool:
    """True when a repeated part holds an unbounded repeat (``(a+)+``, ``(?:x*y)*``, ``(a|b+){2,}``)."""
    try:
        import re._parser as sre_parse  # type: ignore[import-not-found,unused-ignore]  # Python 3.11+
    except ImportError:  # pragma: no cover - Python 3.10
        import sre_parse  # type: ignore[no-redef,unused-ignore]

    unbounded = sre_parse.MAXREPEAT
    found = False

    def children(op: Any, av: Any) -> list[Any]:
        name = str(op)
        if name in _REPEATS:
            return [av[2]]
        if name == "SUBPATTERN":
            return [av[3]]
        if name == "BRANCH":
            return list(av[1])
        if name in ("ASSERT", "ASSERT_NOT", "ATOMIC_GROUP"):
            return [av[1]] if name != "ATOMIC_GROUP" else [av]
        if name == "GROUPREF_EXISTS":
            return [p for p in av[1:] if p is not None]
        return []

    def has_unbounded(items: Any) -> bool:
        for op, av in items:
            if str(op) in _REPEATS and av[1] == unbounded:
                return True
            if any(has_unbounded(child) for child in children(op, av)):
                return True
        return False

    def walk(items: Any) -> None:
        nonlocal found
        for op, av in items:
            if found:
                return
            if str(op) in _REPEATS and av[1] > 1 and has_unbounded(av[2]):
                found = True
                return
            for child in children(op, av):
                walk(child)

    walk(sre_parse.parse(pattern))
    return found


def _parse_frame(item: Any, label: str) -> FrameSpec:
    """A frame: a regex over a whole line (the old form), or {file, function, call?, tags?}."""
    if isinstance(item, str):
        return FrameSpec(label=item, line=_compile(item, label))
    if not isinstance(item, dict):
        raise UserError(f"{label}: expected a regex string or a mapping with keys {', '.join(_FRAME_KEYS)}")
    unknown = sorted(set(item) - set(_FRAME_KEYS))
    if unknown:
        raise UserError(f"{label}: unknown key(s) {', '.join(map(str, unknown))}; valid: {', '.join(_FRAME_KEYS)}")
    for key in ("file", "function"):
        if key not in item:
            raise UserError(f"{label}: missing key '{key}' "
                            "(a regex over the file's basename without .py / over the function's name)")
    tags = item.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) and t for t in tags):
        raise UserError(f"{label}: tags: expected a list of names")
    call = item.get("call")
    return FrameSpec(
        label=f"{item['file']}.py {item['function']}",
        file=_compile(item["file"], f"{label}: file"),
        function=_compile(item["function"], f"{label}: function"),
        call=_compile(call, f"{label}: call") if call is not None else None,
        tags=tuple(tags),
    )


def _parse_evidence(raw: Any, frames: tuple[FrameSpec, ...], label: str) -> EvidenceRule:
    if raw is None:
        return EvidenceRule()
    if not frames:
        raise UserError(f"{label}: evidence: only applies with frames")
    if not isinstance(raw, dict) or set(raw) - set(_EVIDENCE_KEYS):
        raise UserError(f"{label}: evidence: expected a mapping with keys {', '.join(_EVIDENCE_KEYS)}")
    low = raw.get("min")
    if low is not None and (not isinstance(low, int) or isinstance(low, bool) or not 1 <= low <= len(frames)):
        raise UserError(f"{label}: evidence.min: {low!r} is not valid; valid: an integer 1..{len(frames)}")
    require = raw.get("require", [])
    known = {t for f in frames for t in f.tags}
    alone = raw.get("alone", [])
    for key, tags in (("require", require), ("alone", alone)):
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise UserError(f"{label}: evidence.{key}: expected a list of frame tags")
        unknown = sorted(set(tags) - known)
        if unknown:
            raise UserError(f"{label}: evidence.{key}: unknown tag(s) {', '.join(unknown)}; "
                            f"tags of the frames: {', '.join(sorted(known)) or '(none)'}")
    return EvidenceRule(min=low, require=tuple(require), alone=tuple(alone))
