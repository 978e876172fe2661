"""``--sim-position-drop K:F``: a calibration lever of the reference server (the model's, not an SGLang behaviour).

Of the verify steps that would accept draft position K, a fraction F is cut before it, spread evenly (error
diffusion: each such step adds F to a running sum and is cut when it reaches 1), so every trial loses close to F,
not a random share that a short workload would make anywhere from none to twice F. The model's worker and the
torch-free stand-in both cut through this one rule and announce it with this one line.
"""

from __future__ import annotations

import logging

from harness.sim import SIM_LABEL

__all__ = ["PositionDrop"]


class PositionDrop:
    def __init__(self, spec: tuple[int, float] | None, logger: logging.Logger) -> None:
        self.spec = spec
        self._due = 0.0
        if spec is not None:
            logger.info("%s --sim-position-drop: draft position %d loses %.1f%% of its acceptance (a calibration "
                        "lever of the model, not an SGLang behaviour)", SIM_LABEL, spec[0], 100 * spec[1])

    def cut(self, accepted: int) -> int:
        """How many drafts a verify step that would accept ``accepted`` keeps."""
        if self.spec is None or accepted < self.spec[0]:
            return accepted
        self._due += self.spec[1]
        if self._due < 1.0:
            return accepted
        # Cut before position K: the target's own token there is the bonus, so the output is the same tokens; only
        # acceptance at K (and after it) drops.
        self._due -= 1.0
        return self.spec[0] - 1
