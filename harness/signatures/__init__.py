"""Crash signatures: the catalogue and how much of a signature's call path a traceback shows (triage judges with it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.util.face import lazy_face

if TYPE_CHECKING:  # the face's names; each module is imported when one of its names is first used
    from harness.signatures.catalogue import Catalogue, Fix, LineEvent, Match, Signature, StreamMatcher, last_traceback
    from harness.signatures.frame_evidence import FILE_LINE, Evidence, FrameHit, assess
    from harness.signatures.paste import ELISION, normalise

__all__ = ["ELISION", "FILE_LINE", "Catalogue", "Evidence", "Fix", "FrameHit", "LineEvent", "Match", "Signature", "StreamMatcher",
           "assess", "last_traceback", "normalise"]
__getattr__ = lazy_face(__name__)
