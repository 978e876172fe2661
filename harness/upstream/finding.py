"""What one upstream report is about, as a typed record: every reader (a run folder, a comparison, a nightly
incident, a bisection, a minimization) hands one :class:`Finding` to the writer, which needs nothing else.

A finding always rests on one *representative run* (a crash's run, the first bad night's run, the bisection's
culprit run, the minimized case's confirming run): its record says the build, the host and the argv, and its
folder (when it still exists) holds the server log, the first failing request and ``check_env.txt``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness.records.run_record import RunRecord

__all__ = ["Chart", "ChartGroup", "Culprit", "Finding", "FindingKind", "Interval", "MetricChange", "SourceKind"]

SourceKind = Literal["run", "compare", "incident", "bisect", "minimize"]
FindingKind = Literal["crash", "fail", "timeout", "regression"]


@dataclass(frozen=True)
class Interval:
    """A level: the mean of ``points`` values (nights or trials), its 95% interval and the trials under it."""

    mean: float
    low: float
    high: float
    points: int
    trials: int


@dataclass(frozen=True)
class MetricChange:
    """A metric that moved the wrong way: its level before and after, and what that rests on."""

    metric: str  # the registry's name
    label: str  # the registry's label
    unit: str
    higher_is_better: bool
    before: Interval
    after: Interval
    effect: float  # relative change of the mean, after vs before
    rests_on: str  # "12 nights before, 5 after (3 trials each)"; "5 trials a side"


@dataclass(frozen=True)
class ChartGroup:
    """One x position of the chart (a night, a build, a role): its raw values; ``bad`` on the changed side."""

    label: str
    values: tuple[float, ...]
    bad: bool


@dataclass(frozen=True)
class Chart:
    title: str
    y_label: str
    groups: tuple[ChartGroup, ...]


@dataclass(frozen=True)
class Culprit:
    """A bisection's answer: the first bad (or fixed) commit or release and how it was confirmed."""

    revision: str
    subject: str
    author: str
    date: str
    parent: str
    files: tuple[str, ...]
    searched: str  # "36 commits v0.1.0..v0.4.0 of /path (sglang-repro checkout), 10 server launches"
    confirmation: tuple[str, ...]  # one line per confirming revision: its verdict and trials
    confirmed: bool


@dataclass(frozen=True)
class Finding:
    source: SourceKind
    source_ref: str  # the folder, file or incident fingerprint it was read from
    kind: FindingKind
    record: RunRecord  # the representative run
    run_dir: Path | None  # its artifact folder, when it still exists
    scenario_file: Path | None  # the scenario that reproduces it (the minimal one after a minimization)
    how_often: str  # "1 of 1 trials"; "every night since" ...
    since: str | None = None  # the first bad night, commit or release
    last_good: str | None = None
    metric: MetricChange | None = None
    chart: Chart | None = None
    culprit: Culprit | None = None
    minimized: str | None = None  # what the minimizer kept, in words
    context: tuple[str, ...] = ()  # more lines for "Describe the bug" (the comparison's verdict, ...)

    @property
    def case(self) -> str:
        return self.record.case.name
