"""A regression's chart as a PNG: every trial as a dot per night (or build, or role), the level before and after
the change as dashed lines, a dashed rule where it changed. Drawn on :class:`harness.upstream.png.Canvas`."""

from __future__ import annotations

import math
from collections.abc import Callable

from harness.report.svg import nice_ticks
from harness.upstream.finding import Chart
from harness.upstream.png import Canvas, Color

__all__ = ["chart_png"]

_GOOD: Color = (0, 114, 178)  # Okabe-Ito blue and vermillion, as the HTML report's roles
_BAD: Color = (213, 94, 0)
_INK: Color = (40, 40, 40)
_GRID: Color = (225, 225, 225)
_W, _H = 960, 480
_LEFT, _RIGHT, _TOP, _BOTTOM = 120, 24, 56, 92


def _num(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _fit(text: str, width: int, scale: int) -> str:
    most = max(1, (width + scale) // (6 * scale))
    return text if len(text) <= most else text[:max(1, most - 2)] + ".."


def chart_png(chart: Chart) -> bytes:
    c = Canvas(_W, _H)
    values = [v for g in chart.groups for v in g.values if math.isfinite(v)]
    ticks = nice_ticks(min(values), max(values)) if values else [0.0, 1.0]
    low, high = ticks[0], ticks[-1]
    x0, x1, y0, y1 = _LEFT, _W - _RIGHT, _TOP, _H - _BOTTOM
    n = max(1, len(chart.groups))

    def y_of(v: float) -> int:
        return round(y1 - (v - low) / ((high - low) or 1.0) * (y1 - y0))

    def x_of(i: float) -> int:
        return round(x0 + (i + 0.5) / n * (x1 - x0))

    c.text(x0, 16, _fit(chart.title, x1 - x0, 2), _INK, 2)
    for t in ticks:
        c.line(x0, y_of(t), x1, y_of(t), _GRID)
        label = _num(t)
        c.text(x0 - 8 - Canvas.text_width(label, 2), y_of(t) - 7, label, _INK, 2)
    c.line(x0, y0, x0, y1, _INK)
    c.line(x0, y1, x1, y1, _INK)
    c.text(8, y0 - 26, _fit(chart.y_label, x0 + 120, 1), _INK, 1)
    _levels(c, chart, x_of, y_of)
    step = max(1, math.ceil(n / max(1, (x1 - x0) // 72)))
    for i, g in enumerate(chart.groups):
        color = _BAD if g.bad else _GOOD
        k = len(g.values)
        for j, v in enumerate(g.values):
            if math.isfinite(v):
                c.dot(x_of(i + (j - (k - 1) / 2) * min(0.5 / max(k, 1), 0.12)), y_of(v), color, 3)
        if i % step == 0:
            label = _fit(g.label, 70 * step, 1)
            c.text(x_of(i) - Canvas.text_width(label) // 2, y1 + 8, label, _INK, 1)
    first_bad = next((i for i, g in enumerate(chart.groups) if g.bad), None)
    if first_bad:
        x = round((x_of(first_bad - 1) + x_of(first_bad)) / 2)
        c.line(x, y0, x, y1, _INK, dash=4)
    _legend(c, chart, y1 + 36)
    return c.png()


def _mean(values: list[float]) -> float | None:
    finite = [v for v in values if math.isfinite(v)]
    return math.fsum(finite) / len(finite) if finite else None


def _levels(c: Canvas, chart: Chart, x_of: Callable[[float], int], y_of: Callable[[float], int]) -> None:
    for bad, color in ((False, _GOOD), (True, _BAD)):
        idx = [i for i, g in enumerate(chart.groups) if g.bad is bad]
        level = _mean([v for i in idx for v in chart.groups[i].values])
        if idx and level is not None:
            c.line(x_of(idx[0] - 0.45), y_of(level), x_of(idx[-1] + 0.45), y_of(level), color, dash=6)


def _legend(c: Canvas, chart: Chart, y: int) -> None:
    x = _LEFT
    for bad, color, word in ((False, _GOOD, "before"), (True, _BAD, "after")):
        level = _mean([v for g in chart.groups if g.bad is bad for v in g.values])
        if level is None:
            continue
        c.dot(x + 6, y + 7, color, 5)
        x = c.text(x + 18, y, f"{word}: mean {_num(level)}", _INK, 2) + 28
    c.text(x, y + 4, "dots: trials; dashed: levels and the change", _INK, 1)
