"""Progress of a long command (compare, nightly, minimize, bisect): where it is and about how long is left.

On a terminal one line is redrawn in place (``compare: case 2 of 3 · run 7 of 20 · ~1:40 left · now: ...``);
anywhere else (a CI log, a pipe, ``--no-progress``) each event is one plain line, so a log reads top to bottom.
The time left is the mean time per finished unit times the units left: rough, and said to be rough with ``~``.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["NO_PROGRESS_HELP", "Progress", "fmt_duration"]

NO_PROGRESS_HELP = "no redrawn progress line on a terminal: plain lines, as in a CI log"


def fmt_duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}" if seconds >= 3600 \
        else f"{seconds // 60}:{seconds % 60:02d}"


class Progress:
    """Units done out of a total (runs, server runs, steps), shown as ``case k of N`` with time left."""

    def __init__(self, command: str, total: int, *, plain: bool = False, stream: TextIO | None = None,
                 unit: str = "", budget_s: float | None = None) -> None:
        # total 0: not known in advance (minimize's runs); budget_s: the time left is the budget's
        self.command, self.total, self.done, self.unit, self.budget_s = command, max(total, 0), 0, unit, budget_s
        self.stream = stream if stream is not None else sys.stderr
        self.tty = not plain and self.stream.isatty()
        self.start = time.monotonic()
        self._drawn = False

    def left(self) -> str:
        if self.budget_s is not None:
            return f"budget ~{fmt_duration(self.budget_s - (time.monotonic() - self.start))} left"
        if not self.done or self.done >= self.total:
            return ""
        per = (time.monotonic() - self.start) / self.done
        return f"~{fmt_duration(per * (self.total - self.done))} left"

    def line(self, where: str, event: str = "") -> str:
        unit = f" {self.unit}" if self.unit else ""
        count = f"{self.done} of {self.total}{unit} done" if self.total else f"{self.done}{unit} done"
        parts = [where, count, f"{fmt_duration(time.monotonic() - self.start)} elapsed", self.left(), event]
        return f"{self.command}: " + " · ".join(p for p in parts if p)

    def show(self, where: str, event: str = "") -> None:
        """Redraw the line on a terminal; otherwise print it (a plain line per event)."""
        text = self.line(where, event)
        if self.tty:
            self.stream.write("\r\x1b[2K" + text[: 200])
            self._drawn = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def note(self, text: str) -> None:
        """A line that stays (a finished trial's outcome), above the redrawn progress line."""
        if self._drawn:
            self.stream.write("\r\x1b[2K")
            self._drawn = False
        self.stream.write(text + "\n")
        self.stream.flush()

    def step(self, n: int = 1) -> None:
        self.done += n

    def finish(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._drawn = False
