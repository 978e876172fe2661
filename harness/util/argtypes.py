"""argparse value types shared by the CLI and the pytest plugin (pytest's options are argparse's)."""

from __future__ import annotations

import argparse

__all__ = ["MAX_COUNT", "positive_int", "release_version"]


# A count beyond this is a typo (``--trials 10**40`` would run for ever): refused like any bad value.
MAX_COUNT = 1_000_000


def positive_int(text: str) -> int:
    """A whole number in [1, MAX_COUNT], e.g. for ``--trials``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be at least 1")
    if value > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: must be at most {MAX_COUNT}")
    return value


def release_version(text: str) -> str:
    """An sglang release as PEP 440 spells one (``0.5.14``, ``0.5.13.post1``), canonical; ``1e999`` is none."""
    from packaging.version import InvalidVersion, Version

    if len(text) > 64:
        raise argparse.ArgumentTypeError(f"{text[:40]!r}...: {len(text)} characters is no release")
    try:
        return str(Version(text))
    except InvalidVersion:
        raise argparse.ArgumentTypeError(f"{text!r} is not a release (e.g. 0.5.14 or 0.5.13.post1)") from None
