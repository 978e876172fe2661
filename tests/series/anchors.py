"""The three rules this project's detector is measured against, applied online (one new point at a time).

- ``sglang_rule``: SGLang's own habit: the new point is more than 10% from the mean of the last 10;
  ``sglang_rule_young`` the same over the points there are, from one on (a young series has fewer than 10).
- ``hud_rule``: the PyTorch HUD's vLLM rule: the median of the last 3 points against the median of
  the 3 before them, alert below x0.8 or above x1.2.
- ``otava_rule``: Otava's defaults: E-Divisive means over the last 50 points, each split kept when a
  Student t-test of the two sides gives p < 0.001 (Hunter/Otava's significance test), recursively.

Each returns the indices of the changes it reports at the newest point of ``values``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats

__all__ = ["Replay", "hud_rule", "otava_rule", "sglang_rule", "sglang_rule_young"]


def sglang_rule(values: Sequence[float]) -> list[int]:
    y = np.asarray(values, dtype=float)
    if len(y) < 11:
        return []
    mean = float(np.mean(y[-11:-1]))
    return [len(y) - 1] if mean and abs(y[-1] / mean - 1) > 0.10 else []


def sglang_rule_young(values: Sequence[float]) -> list[int]:
    y = np.asarray(values, dtype=float)
    if len(y) < 2:
        return []
    mean = float(np.mean(y[-11:-1]))
    return [len(y) - 1] if mean and abs(y[-1] / mean - 1) > 0.10 else []


def hud_rule(values: Sequence[float]) -> list[int]:
    y = np.asarray(values, dtype=float)
    if len(y) < 6:
        return []
    before, after = float(np.median(y[-6:-3])), float(np.median(y[-3:]))
    if not before:
        return []
    ratio = after / before
    return [len(y) - 3] if ratio < 0.8 or ratio > 1.2 else []


def _edivisive_split(y: np.ndarray, min_size: int = 3) -> tuple[int, float] | None:
    """The split that maximises the E-Divisive (energy distance) statistic, and that statistic.

    Every split at once from 2-D prefix sums of the distance matrix: the sums over the two sides
    and between them are three lookups per split.
    """
    n = len(y)
    if n < 2 * min_size:
        return None
    d = np.abs(y[:, None] - y[None, :])
    p = np.zeros((n + 1, n + 1))
    p[1:, 1:] = d.cumsum(0).cumsum(1)
    tau = np.arange(min_size, n - min_size + 1)
    m, k = tau.astype(float), (n - tau).astype(float)
    aa = p[tau, tau]
    ab = p[tau, n] - aa
    bb = p[n, n] - 2 * p[tau, n] + aa
    q = (m * k / n) * (2 * ab / (m * k) - aa / (m * (m - 1)) - bb / (k * (k - 1)))
    best = int(np.argmax(q))
    return int(tau[best]), float(q[best])


def _otava_points(y: np.ndarray, start: int, max_p: float, out: list[int]) -> None:
    split = _edivisive_split(y)
    if split is None:
        return
    tau = split[0]
    p = float(stats.ttest_ind(y[:tau], y[tau:], equal_var=False).pvalue)
    if p < max_p:
        out.append(start + tau)
        _otava_points(y[:tau], start, max_p, out)
        _otava_points(y[tau:], start + tau, max_p, out)


def otava_rule(values: Sequence[float], *, window: int = 50, max_p: float = 0.001) -> list[int]:
    y = np.asarray(values, dtype=float)
    start = max(0, len(y) - window)
    found: list[int] = []
    _otava_points(y[start:], start, max_p, found)
    return sorted(found)


class Replay:
    """A rule over point values as an online detector: each night it sees the whole series so far.

    The anchors read point values (the median of a night's trials), not the trials: that is what
    they read in the tools they come from.
    """

    def __init__(self, rule: Callable[[Sequence[float]], list[int]]) -> None:
        self.rule = rule
        self.values: list[float] = []

    def push(self, value: float, trials: Sequence[float]) -> list[tuple[str, int]]:
        self.values.append(value)
        return [("step", i) for i in self.rule(self.values)]
