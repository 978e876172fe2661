"""What one run gave, as the minimization oracle sees it, and the failure it is looking for.

Interesting means the same failure: the same outcome, the same signature id, the same phase, and
the same frames (file base name and function of each line of the crash's traceback, line numbers
left out). Anything else, another crash included, is "not interesting": a reduction never slips
to another bug.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from harness.records.outcome import MISBEHAVED, Outcome, Phase
from harness.records.run_record import RunRecord

__all__ = ["Observation", "Target", "frames_of", "observe"]

_FRAME = re.compile(r'File "([^"]+)", line \d+, in (\S+)')


def frames_of(excerpt: str) -> tuple[str, ...]:
    """``basename:function`` of each frame of the last traceback in ``excerpt``."""
    blocks = excerpt.split("Traceback (most recent call last):")
    last = blocks[-1] if len(blocks) > 1 else excerpt
    return tuple(f"{Path(path.replace(chr(92), '/')).name}:{func}" for path, func in _FRAME.findall(last))


@dataclass(frozen=True)
class Observation:
    outcome: Outcome
    signature: str | None
    phase: Phase | None
    frames: tuple[str, ...]
    reason: str
    duration_s: float
    artifacts: str
    argv: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        return self.outcome in MISBEHAVED

    @property
    def undecided(self) -> bool:
        """Could not tell (infra, timeout, interrupted): the product was not judged."""
        return not self.outcome.decided

    def describe(self) -> str:
        if self.outcome is Outcome.PASS:
            return Outcome.PASS.value
        text = self.outcome.value
        if self.signature:
            text += f" {self.signature}"
        if self.phase:
            text += f" at {self.phase.value}"
        if self.outcome is not Outcome.CRASH or not self.signature or self.signature == "unknown":
            text += f" ({self.reason[:120]})"
        return text


def observe(record: RunRecord) -> Observation:
    """How the minimization oracle sees one run record."""
    return Observation(
        outcome=record.outcome,
        signature=record.signature,
        phase=record.phase,
        frames=frames_of(record.excerpt) if record.excerpt else (),
        reason=record.reason,
        duration_s=record.duration_s,
        artifacts=record.artifacts,
        argv=tuple(record.server.argv),
    )


@dataclass(frozen=True)
class Target:
    """The failure being minimized, from the baseline."""

    outcome: Outcome
    signature: str | None
    phase: Phase | None
    frames: tuple[str, ...]

    @classmethod
    def of(cls, obs: Observation) -> Target:
        return cls(obs.outcome, obs.signature, obs.phase, obs.frames)

    def matches(self, obs: Observation) -> bool:
        return (obs.outcome, obs.signature, obs.phase, obs.frames) == (
            self.outcome, self.signature, self.phase, self.frames)

    def describe(self) -> str:
        text = f"{self.outcome.value} {self.signature or ''}".strip()
        if self.phase:
            text += f" at {self.phase.value}"
        return text + f" ({len(self.frames)} frames)"
