"""One item's trials against its recorded baseline: a verdict per figure (and per draft position).

What counts as a trial: a run that finished its workload (outcome pass or fail: a failed bound still
measured); a crash or infra trial has no figures and is left out. A figure the run did not measure
(no histogram from the server) is a failed check saying so, never a pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.baselines.check import DEFAULT_FALSE_FAILURE_RATE, Band, Summary, band, summarise
from harness.baselines.model import Entry, Figure
from harness.records.metric_definitions import ACCEPT_LENGTH, ACCEPT_LENGTH_SERVER, OUTPUT_THROUGHPUT, position_metric
from harness.records.outcome import MEASURED
from harness.records.run_record import RunRecord
from harness.scenario.model import BaselineCheck

__all__ = ["BaselineVerdict", "accept_figure", "judge_entry", "measured_trials", "missing_figures", "trial_values"]

_LABELS = {ACCEPT_LENGTH.name: "acceptance length", "accept_by_position": "acceptance rate",
           "output_throughput": "output throughput tok/s"}


@dataclass(frozen=True)
class BaselineVerdict:
    """One figure judged: which (and which draft position), the baseline, what was measured, the band."""

    metric: str
    position: int | None
    baseline: Summary
    measured: Summary | None
    band: Band | None
    rate: float

    @property
    def held(self) -> bool:
        return self.band is not None and self.band.held

    @property
    def label(self) -> str:
        text = _LABELS.get(self.metric, self.metric)
        return f"{text} at draft position {self.position}" if self.position is not None else text

    def message(self) -> str:
        """One line: the metric, its position, baseline, measured and band (the failure message)."""
        ref = f"baseline {self.baseline.mean:.4g} (sd {self.baseline.sd:.3g}, {self.baseline.n} trials)"
        if self.measured is None or self.band is None:
            return f"{self.label}: not measured in any trial; {ref}"
        state = "held" if self.held else "BELOW the baseline band"
        return (f"{self.label} {self.measured.mean:.4g} over {self.measured.n} trial(s) {state}: {ref}, "
                f"band {self.band.describe()}")

    def properties(self) -> list[tuple[str, object]]:
        """JUnit properties: baseline, measured and band lower edge."""
        name = f"baseline.{self.metric}" + (f".pos{self.position}" if self.position is not None else "")
        out: list[tuple[str, object]] = [(f"{name}.baseline", round(self.baseline.mean, 6))]
        if self.measured is not None:
            out.append((f"{name}.measured", round(self.measured.mean, 6)))
        if self.band is not None:
            out.append((f"{name}.band_lower", round(self.band.lower, 6)))
        out.append((f"{name}.held", self.held))
        return out


def measured_trials(runs: Sequence[RunRecord]) -> list[RunRecord]:
    return [r for r in runs if r.outcome in MEASURED]


def trial_values(runs: Sequence[RunRecord], metric_name: str) -> list[float]:
    out = []
    for r in measured_trials(runs):
        value = r.metrics.get(metric_name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out.append(float(value))
    return out


def _verdict(metric: str, position: int | None, figure: Figure, trials: int, values: Sequence[float],
             rate: float) -> BaselineVerdict:
    baseline = Summary(trials, figure.mean, figure.sd)
    measured = summarise(values)
    return BaselineVerdict(metric, position, baseline, measured,
                            band(baseline, measured, rate) if measured is not None else None, rate)


def accept_figure(entry: Entry, accept_metric: str) -> Figure | None:
    """The entry's acceptance length of the kind a check names: the measured requests' or the server's (the
    /metrics gauge is a recent window, not a figure of the trial: never recorded)."""
    return {ACCEPT_LENGTH.name: entry.accept_length, ACCEPT_LENGTH_SERVER.name: entry.accept_length_server
            }.get(accept_metric)


def judge_entry(checks: Mapping[str, BaselineCheck], entry: Entry, runs: Sequence[RunRecord], *,
                accept_metric: str = ACCEPT_LENGTH.name, default_rate: float = DEFAULT_FALSE_FAILURE_RATE,
                ) -> list[BaselineVerdict]:
    """Every baseline check of ``checks`` on ``runs`` against ``entry``. A check whose figure the baseline
    does not hold is a verdict without band (not measured by the recording: re-record)."""
    out: list[BaselineVerdict] = []
    for name, check in checks.items():
        rate = check.false_failure_rate or default_rate
        if name == ACCEPT_LENGTH.name:
            figure = accept_figure(entry, accept_metric)
            if figure is not None:
                out.append(_verdict(name, None, figure, entry.trials, trial_values(runs, accept_metric), rate))
        elif name == "output_throughput" and entry.output_throughput is not None:
            out.append(_verdict(name, None, entry.output_throughput, entry.trials,
                                trial_values(runs, OUTPUT_THROUGHPUT.name), rate))
        elif name == "accept_by_position" and entry.accept_by_position is not None:
            for k, figure in enumerate(entry.accept_by_position, 1):
                out.append(_verdict(name, k, figure, entry.trials, trial_values(runs, position_metric(k)), rate))
    return out


def missing_figures(checks: Mapping[str, BaselineCheck], entry: Entry, *,
                    accept_metric: str = ACCEPT_LENGTH.name) -> list[str]:
    """The checked figures the entry does not hold (it was recorded before the check was added)."""
    held = {ACCEPT_LENGTH.name: accept_figure(entry, accept_metric),
            "output_throughput": entry.output_throughput, "accept_by_position": entry.accept_by_position}
    return [name for name in checks if held.get(name) is None]
