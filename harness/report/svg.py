"""Per-trial plots as inline SVG: no script, no library, nothing fetched, so report.html works offline."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from harness.records.outcome import Outcome
from harness.report._format import fmt_num

__all__ = ["Series", "trial_plot", "nice_ticks", "ROLE_COLORS"]

# Colour-blind-safe (Okabe-Ito) so roles stay apart for every reader.
ROLE_COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00")

_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 16, 44, 40


@dataclass(frozen=True)
class Series:
    """One role's per-trial values (NaN where a trial has none) and outcomes."""

    label: str
    color: str
    values: tuple[float, ...]
    outcomes: tuple[str, ...]


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering ``[low, high]`` (Heckbert's nice numbers)."""
    if high < low:
        low, high = high, low
    if high == low:
        pad = abs(low) * 0.05 or 1.0
        low, high = low - pad, high + pad
    raw = (high - low) / max(count - 1, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    start = math.floor(low / step) * step
    ticks = []
    value = start
    while value <= high + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    if ticks[-1] < high:
        ticks.append(round(value, 12))
    return ticks


def _attr(value: str) -> str:
    return escape(value, quote=True)


@dataclass(frozen=True)
class _Frame:
    """Where a trial plot's values land: ``trials`` slots across, ``y_low``..``y_high`` up."""

    width: int
    height: int
    trials: int
    lanes: int  # series side by side in each trial's slot
    y_low: float
    y_high: float

    @property
    def plot_w(self) -> int:
        return self.width - _LEFT - _RIGHT

    @property
    def plot_h(self) -> int:
        return self.height - _TOP - _BOTTOM

    def y_of(self, value: float) -> float:
        return _TOP + self.plot_h - (value - self.y_low) / (self.y_high - self.y_low) * self.plot_h

    def x_of(self, trial: int, k: float) -> float:
        step = self.plot_w / max(self.trials, 1)
        offset = (k - (self.lanes - 1) / 2) * min(8.0, step / (self.lanes + 1))
        return _LEFT + step * (trial + 0.5) + offset


def trial_plot(title: str, series: Sequence[Series], *, width: int = 520, height: int = 250) -> str:
    """An SVG chart of per-trial values: filled dots for passing trials, hollow for others,
    a cross on the axis where a trial has no value (it crashed or failed before measuring)."""
    trials = max((len(s.values) for s in series), default=0)
    finite = [v for s in series for v in s.values if math.isfinite(v)]
    ticks = nice_ticks(min(finite), max(finite)) if finite else [0.0, 1.0]
    frame = _Frame(width, height, trials, len(series), ticks[0], ticks[-1])
    parts = _plot_head(title, series, frame)
    if trials == 0 or not finite:
        parts.append(
            f'<text x="{_LEFT + frame.plot_w / 2}" y="{_TOP + frame.plot_h / 2}" text-anchor="middle" '
            'class="plot-empty">no values: no trial produced this metric</text>'
        )
    parts += _plot_axes(frame, ticks if finite else [])
    for k, s in enumerate(series):
        parts += _plot_series(frame, k, s, bool(finite))
    parts.append("</svg>")
    return "".join(parts)


def _plot_head(title: str, series: Sequence[Series], frame: _Frame) -> list[str]:
    """The SVG element, its title, the legend and the plot area."""
    width, height = frame.width, frame.height
    parts = [
        f'<svg class="plot" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{_attr(title)}">',
        f"<title>{escape(title)}</title>",
        f'<text x="{_LEFT}" y="18" class="plot-title">{escape(title)}</text>',
    ]
    legend_x = _LEFT
    for s in series:
        parts.append(f'<rect x="{legend_x}" y="27" width="10" height="10" fill="{_attr(s.color)}"/>')
        parts.append(f'<text x="{legend_x + 14}" y="36" class="plot-legend">{escape(s.label)}</text>')
        legend_x += 24 + 7 * len(s.label)
    parts.append(
        f'<rect x="{_LEFT}" y="{_TOP}" width="{frame.plot_w}" height="{frame.plot_h}" class="plot-area"/>'
    )
    return parts


def _plot_axes(frame: _Frame, ticks: Sequence[float]) -> list[str]:
    """Grid lines with their values (none without values), trial numbers, the axis label."""
    parts = []
    plot_w, plot_h = frame.plot_w, frame.plot_h
    for tick in ticks:
        y = frame.y_of(tick)
        parts.append(f'<line x1="{_LEFT}" x2="{_LEFT + plot_w}" y1="{y:.1f}" y2="{y:.1f}" class="plot-grid"/>')
        parts.append(
            f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" class="plot-tick">{fmt_num(tick)}</text>'
        )
    for trial in range(frame.trials):
        parts.append(
            f'<text x="{frame.x_of(trial, (frame.lanes - 1) / 2):.1f}" y="{_TOP + plot_h + 16}" '
            f'text-anchor="middle" class="plot-tick">{trial + 1}</text>'
        )
    parts.append(
        f'<text x="{_LEFT + plot_w / 2}" y="{frame.height - 6}" text-anchor="middle" class="plot-axis">trial</text>'
    )
    return parts


def _plot_series(frame: _Frame, k: int, s: Series, finite: bool) -> list[str]:
    """One series: its line, the mean of its passing trials, a mark per trial (``finite``: any series has a
    value, so the y axis means something)."""
    parts = []
    points = [(frame.x_of(i, k), frame.y_of(v)) for i, v in enumerate(s.values) if math.isfinite(v)]
    if len(points) > 1 and finite:
        coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        parts.append(f'<polyline points="{coords}" fill="none" stroke="{_attr(s.color)}" class="plot-line"/>')
    passing = [v for v, o in zip(s.values, s.outcomes) if o == Outcome.PASS and math.isfinite(v)]
    if passing and finite:
        y = frame.y_of(sum(passing) / len(passing))
        parts.append(
            f'<line x1="{_LEFT}" x2="{_LEFT + frame.plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="{_attr(s.color)}" '
            'class="plot-mean"/>'
        )
    for i, value in enumerate(s.values):
        outcome = s.outcomes[i] if i < len(s.outcomes) else "?"
        x = frame.x_of(i, k)
        tip = f"{s.label}, trial {i + 1}: {outcome}"
        if math.isfinite(value) and finite:
            fill = _attr(s.color) if outcome == Outcome.PASS else "white"
            parts.append(
                f'<circle cx="{x:.1f}" cy="{frame.y_of(value):.1f}" r="4.5" fill="{fill}" '
                f'stroke="{_attr(s.color)}" stroke-width="2"><title>{escape(tip)}, {fmt_num(value)}</title></circle>'
            )
        else:
            y = _TOP + frame.plot_h - 8
            parts.append(
                f'<path d="M{x - 4:.1f},{y - 4:.1f} L{x + 4:.1f},{y + 4:.1f} M{x - 4:.1f},{y + 4:.1f} '
                f'L{x + 4:.1f},{y - 4:.1f}" stroke="{_attr(s.color)}" stroke-width="2">'
                f"<title>{escape(tip)}, no value</title></path>"
            )
    return parts
