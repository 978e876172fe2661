"""argparse value types shared by the CLI and the pytest plugin (pytest's options are argparse's)."""

from __future__ import annotations

import argparse

__all__ = ["MAX_COUNT", "positive_int"]


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
