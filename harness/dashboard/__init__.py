"""The offline dashboard: a static site built from the results store (see ``site.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.util.face import lazy_face

if TYPE_CHECKING:  # the face's names; each module is imported when one of its names is first used
    from harness.dashboard.site import build_site

__all__ = ["build_site"]
__getattr__ = lazy_face(__name__)
