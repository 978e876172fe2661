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
from typing import Any

__all__ = ["Observation", "Target", "frames_of", "observe"]

_FRAME = re.compile(r'File "([^"]+)", line \d+, in (\S+)')
# The legacy run record has no phase yet; its reason names it.
_PHASE_BY_REASON = (("pre-flight:", "pre-flight"), ("start-up:", "start-up"), ("warm-up:", "warm-up"),
                    ("during warm-up", "warm-up"), ("during workload", "workload"), ("teardown:", "teardown"))


def frames_of(excerpt: str) -> tuple[str, ...]:
    """``basename:function`` of each frame of the last traceback in ``excerpt``."""
    blocks = excerpt.split("Traceback (most recent call last):")
    last = blocks[-1] if len(blocks) > 1 else excerpt
    return tuple(f"{Path(path.replace(chr(92), '/')).name}:{func}" for path, func in _FRAME.findall(last))


@dataclass(frozen=True)
class Observation:
    outcome: str
    signature: str | None
    phase: str | None
    frames: tuple[str, ...]
    reason: str
    duration_s: float
    artifacts: str
    argv: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        return self.outcome in ("crash", "fail")

    @property
    def undecided(self) -> bool:
        """Could not tell (infra, timeout, interrupted): the product was not judged."""
        return self.outcome not in ("pass", "crash", "fail")

    def describe(self) -> str:
        if self.outcome == "pass":
            return "pass"
        text = self.outcome
        if self.signature:
            text += f" {self.signature}"
        if self.phase:
            text += f" at {self.phase}"
        if self.outcome != "crash" or not self.signature or self.signature == "unknown":
            text += f" ({self.reason[:120]})"
        return text


def _phase(record: Any) -> str | None:
    phase = getattr(record, "phase", None)
    if phase is not None:
        return str(getattr(phase, "value", phase))
    reason = str(getattr(record, "reason", "") or "")
    return next((p for prefix, p in _PHASE_BY_REASON if reason.startswith(prefix)), None)


def observe(record: Any) -> Observation:
    """An observation of a run record (``harness.record.RunRecord``, or the legacy ``RunResult``)."""
    outcome = record.outcome
    server = getattr(record, "server", None)
    argv = getattr(server, "argv", None) if not isinstance(server, dict) else server.get("argv")
    excerpt = str(getattr(record, "excerpt", "") or "")
    return Observation(
        outcome=str(getattr(outcome, "value", outcome)),
        signature=getattr(record, "signature", None),
        phase=_phase(record),
        frames=frames_of(excerpt) if excerpt else (),
        reason=str(getattr(record, "reason", "") or ""),
        duration_s=float(getattr(record, "duration_s", 0.0) or 0.0),
        artifacts=str(getattr(record, "artifacts", "") or ""),
        argv=tuple(argv or ()),
    )


@dataclass(frozen=True)
class Target:
    """The failure being minimized, from the baseline."""

    outcome: str
    signature: str | None
    phase: str | None
    frames: tuple[str, ...]

    @classmethod
    def of(cls, obs: Observation) -> Target:
        return cls(obs.outcome, obs.signature, obs.phase, obs.frames)

    def matches(self, obs: Observation) -> bool:
        return (obs.outcome, obs.signature, obs.phase, obs.frames) == (
            self.outcome, self.signature, self.phase, self.frames)

    def describe(self) -> str:
        text = f"{self.outcome} {self.signature or ''}".strip()
        if self.phase:
            text += f" at {self.phase}"
        return text + f" ({len(self.frames)} frames)"
