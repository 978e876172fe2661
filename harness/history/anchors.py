"""The three rules this project's detector is measured against, applied online (one new point at a time).

- ``sglang_rule``: SGLang's own habit: the new point is more than 10% from the mean of the last 10.
- ``hud_rule``: the PyTorch HUD's vLLM rule: the median of the last 3 points against the median of
  the 3 before them, alert below x0.8 or above x1.2.
- ``otava_rule``: Otava's defaults: E-Divisive means over the last 50 points, each split kept when a
  Student t-test of the two sides gives p < 0.001 (Hunter/Otava's significance test), recursively.

Each returns the indices of the changes it reports at the newest point of ``values``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

__all__ = ["hud_rule", "otava_rule", "sglang_rule"]


def sglang_rule(values: Sequence[float]) -> list[int]:
    y = np.asarray(values, dtype=float)
    if len(y) < 11:
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
    """The split that maximises the E-Divisive (energy distance) statistic, and that statistic."""
    n = len(y)
    if n < 2 * min_size:
        return None
    d = np.abs(y[:, None] - y[None, :])
    best: tuple[int, float] | None = None
    for tau in range(min_size, n - min_size + 1):
        a, b = d[:tau, :tau], d[tau:, tau:]
        m, k = tau, n - tau
        between = 2.0 * d[:tau, tau:].mean()
        within_a = a.sum() / (m * (m - 1)) if m > 1 else 0.0
        within_b = b.sum() / (k * (k - 1)) if k > 1 else 0.0
        q = (m * k / n) * (between - within_a - within_b)
        if best is None or q > best[1]:
            best = (tau, q)
    return best


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
