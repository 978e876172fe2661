"""The format of ``fixtures/baselines/<scenario>.yaml``: recorded baselines, reviewed like code.

One file per scenario; one entry per (case, hardware, build line). The hardware key is ``<count>x <GPU
model>`` for a real build (``1x NVIDIA H200``) and ``cpu <model> x<cores>`` for the CPU reference server
(its speed and, through batching, its figures are the CPU's). The build line is what the scenario names
the role's build (``pip:sglang==0.5.15``, ``sim:post-fix``): a pull request's run of ``--build
after=python:...`` is judged by the line its role stands for; ``build`` is what was actually measured.

Each figure is the mean and sample standard deviation of per-trial figures, over ``trials`` trials; the
check (:mod:`harness.baselines.check`) needs both. ``replaced`` keeps what a re-recording replaced.
Strict like scenarios: unknown keys, a duplicate key or a bad value are one line each with file:line.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.records.metric_definitions import ACCEPT_LENGTH, ACCEPT_LENGTH_SERVER

__all__ = ["METRICS", "Entry", "Figure", "BaselineFile", "ReplacedEntry", "key_text"]

# The figures a baseline holds, as checks name them (``checks.<name>: {baseline: true}``).
METRICS = (ACCEPT_LENGTH.name, "accept_by_position", "output_throughput")
_DATE = r"^\d{4}-\d{2}-\d{2}$"


class _Strict(BaseModel):
    # strict: `trials: "2"` is a string in the file, not a count (pydantic's lax mode turned it into 2)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, strict=True)


class Figure(_Strict):
    """One figure over the recorded trials: every figure a baseline holds (an acceptance length, a rate, tokens/s) is
    at least 0."""

    mean: float = Field(ge=0)
    sd: float = Field(ge=0)


class ReplacedEntry(_Strict):
    """What a later recording replaced: the figures as they were, and when they stopped being the baseline."""

    build: str = Field(min_length=1)
    recorded: str = Field(pattern=_DATE)
    replaced_on: str = Field(pattern=_DATE)
    harness_version: str = Field(min_length=1)
    trials: int = Field(ge=2, le=10_000)
    why: str | None = None
    accept_length: Figure | None = None
    accept_length_server: Figure | None = None
    accept_by_position: list[Figure] | None = None
    output_throughput: Figure | None = None


class Entry(_Strict):
    """The baseline of one case on one kind of hardware and one build line."""

    case: str = Field(min_length=1, max_length=200)
    hardware: str = Field(min_length=1, max_length=200)
    line: str = Field(min_length=1, max_length=300)
    build: str = Field(min_length=1, max_length=300, description="what was measured: spec, version, commit")
    recorded: str = Field(pattern=_DATE)
    harness_version: str = Field(min_length=1)
    trials: int = Field(ge=2, le=10_000, description="trials behind each figure (a spread needs two)")
    accept_length: Figure | None = Field(default=None, description="the measured requests' acceptance length")
    accept_length_server: Figure | None = Field(default=None, description="the server's own figure, where present")
    accept_by_position: list[Figure] | None = Field(default=None, description="acceptance rate at draft position 1..k")
    output_throughput: Figure | None = Field(default=None, description="output tokens/s")
    replaced: list[ReplacedEntry] = Field(default_factory=list)

    @model_validator(mode="after")
    def _some_figure(self) -> Entry:
        if all(getattr(self, name) is None for name in (*METRICS, ACCEPT_LENGTH_SERVER.name)):
            raise ValueError("an entry needs at least one figure (accept_length, accept_by_position, "
                             "output_throughput)")
        if self.accept_by_position is not None and not self.accept_by_position:
            raise ValueError("accept_by_position is empty: remove it or give position 1..k")
        return self

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.case, self.hardware, self.line)


def key_text(key: tuple[str, str, str]) -> str:
    case, hardware, line = key
    return f"case {case} on {hardware}, build line {line}"


class BaselineFile(_Strict):
    """A scenario's baselines."""

    scenario: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    baselines: list[Entry] = Field(default_factory=list)
    version: Literal[1] = 1

    @model_validator(mode="after")
    def _unique(self) -> BaselineFile:
        seen: dict[tuple[str, str, str], int] = {}
        for i, entry in enumerate(self.baselines):
            if entry.key in seen:
                raise ValueError(f"baselines[{i}] repeats baselines[{seen[entry.key]}] "
                                 f"({key_text(entry.key)}): one entry per case, hardware and build line")
            seen[entry.key] = i
        return self

    def find(self, case: str, hardware: str, line: str) -> Entry | None:
        return next((e for e in self.baselines if e.key == (case, hardware, line)), None)


def slug(text: str) -> str:
    """A file-name-safe form of a scenario name (they are slugs already; this guards a hand-made one)."""
    return re.sub(r"[^a-z0-9_.-]+", "-", text.lower()).strip("-") or "scenario"
