"""Triage's input: the files a person gives, refused before any is judged, each judged as a text."""

from __future__ import annotations

from pathlib import Path

from harness.signatures.catalogue import Catalogue
from harness.triage.verdicts import FileVerdict, triage_text
from harness.util.errors import UserError

__all__ = ["read_pasted", "triage"]


def triage(paths: list[Path], catalogue: Catalogue, *, title: str | None = None, version: str | None = None,
           releases: bool = True) -> list[FileVerdict]:
    """Each file judged, in the order given. Raises UserError on a missing or unreadable file, before judging any."""
    for path in paths:
        try:
            if not path.exists():
                raise UserError(f"{path}: no such log file")
        except OSError as exc:  # a name too long, a loop of links
            raise UserError(f"{path}: cannot look at it ({exc.strerror or exc})") from None
        if not path.is_file():
            from harness.util.bounded_read import kind_of_mode

            raise UserError(f"{path}: {kind_of_mode(path.stat().st_mode)}, not a log file; give the file itself")
    texts = [read_pasted(path) for path in paths]
    from harness.triage.fixture_file import split_header

    out = []
    for path, text in zip(paths, texts, strict=True):
        # a triage fixture is judged as its test judges it: header blanked, its title and version unless given
        header, text = split_header(text)
        out.append(triage_text(path, text, catalogue, title=title or header.get("title"),
                               version=version or header.get("version"), releases=releases))
    return out


def read_pasted(path: Path) -> str:
    """The one entrance of a pasted text: read bounded, its secrets redacted before anything is judged, printed,
    put in JSON or blessed into a fixture (a pasted server log holds ``--api-key``, ``HF_TOKEN=`` and Bearer
    values; a verdict's excerpt quotes the very lines that hold them). Redaction keeps every newline, so line
    numbers are the file's."""
    from harness.util.bounded_read import ReadRefused, read_bytes
    from harness.util.redact import redact_everywhere

    try:
        data = read_bytes(path, "log")
    except ReadRefused as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror or exc.__class__.__name__})") from None
    return redact_everywhere(_decoded(data))


def _decoded(data: bytes) -> str:
    """A paste's text: UTF-16 where its byte-order mark says so (a Windows editor's save; read as UTF-8 it was NULs
    between letters and silently ``none``), UTF-8 otherwise; a text whose lines end in CR alone (an old Mac editor,
    a terminal capture) has them as lines, not one line."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        text = data.decode("utf-16", errors="replace")
    else:
        text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
    return text.replace("\r", "\n") if "\r" in text and "\n" not in text else text
