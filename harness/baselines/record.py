"""Recording baselines: trials summarised into an entry, merged into the scenario's file, shown first.

A re-recording replaces the entry of the same case, hardware and build line and keeps the one it replaced
under ``replaced`` (newest first), so the file says what the baseline was before an intended change.
Nothing is written unless asked: :func:`plan` returns the change (a diff) and :func:`apply` writes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from harness.baselines.check import summarise
from harness.baselines.files import dump, load, render_diff, save
from harness.baselines.judge import measured_trials, trial_values
from harness.baselines.model import BaselineFile, Entry, Figure, ReplacedEntry
from harness.records.metric_definitions import ACCEPT_LENGTH, ACCEPT_LENGTH_SERVER, OUTPUT_THROUGHPUT, position_metric
from harness.records.run_record import RunRecord
from harness.util.bounded_read import read_text
from harness.util.errors import UserError
from harness.version import harness_version

__all__ = ["MAX_REPLACED", "Change", "apply", "build_text", "entry_from_runs", "plan"]

_MAX_POSITIONS = 64
MAX_REPLACED = 20  # replaced entries kept per entry, newest first (git keeps the rest)


def _figure(values: Sequence[float]) -> Figure | None:
    s = summarise(values)
    return Figure(mean=round(s.mean, 6), sd=round(s.sd, 6)) if s is not None and s.n >= 2 else None


def build_text(run: RunRecord) -> str:
    """What was measured, in one line: the spec, and the version and commit where known."""
    b = run.build
    parts = [b.spec]
    if b.version:
        parts.append(f"version {b.version}")
    if b.commit:
        parts.append(f"commit {b.commit[:12]}")
    return ", ".join(parts)


def entry_from_runs(runs: Sequence[RunRecord], *, case: str, hardware: str, line: str,
                    today: str | None = None) -> Entry:
    """The entry the trials of ``runs`` make; UserError when fewer than two trials measured anything."""
    trials = measured_trials(runs)
    if len(trials) < 2:
        why = ""
        others = [r for r in runs if r not in trials]
        if others:
            last = others[-1]
            why = f"; the others ended {last.outcome.value}: {last.reason or 'no reason recorded'}"
        advice = ("give --trials 2 or more" if len(runs) < 2
                  else "a baseline needs a build that finishes its workload; see the runs' result.json")
        raise UserError(f"case {case}: {len(trials)} of {len(runs)} trial(s) finished their workload{why}; a baseline "
                        f"needs at least 2 (its spread is what the check's band is made of): {advice}")
    positions: list[Figure] = []
    for k in range(1, _MAX_POSITIONS + 1):
        figure = _figure(trial_values(trials, position_metric(k)))
        if figure is None:
            break
        positions.append(figure)
    return Entry(
        case=case, hardware=hardware, line=line, build=build_text(trials[-1]),
        recorded=today or date.today().isoformat(), harness_version=harness_version(), trials=len(trials),
        accept_length=_figure(trial_values(trials, ACCEPT_LENGTH.name)),
        accept_length_server=_figure(trial_values(trials, ACCEPT_LENGTH_SERVER.name)),
        accept_by_position=positions or None,
        output_throughput=_figure(trial_values(trials, OUTPUT_THROUGHPUT.name)),
    )


def _replaced(old: Entry, today: str, why: str | None) -> ReplacedEntry:
    return ReplacedEntry(build=old.build, recorded=old.recorded, replaced_on=today, harness_version=old.harness_version,
                         trials=old.trials, why=why, accept_length=old.accept_length,
                         accept_length_server=old.accept_length_server, accept_by_position=old.accept_by_position,
                         output_throughput=old.output_throughput)


@dataclass(frozen=True)
class Change:
    """The file as it is and as it would be after recording ``entries``."""

    path: Path
    old_text: str
    new: BaselineFile

    @property
    def new_text(self) -> str:
        return dump(self.new)

    @property
    def diff(self) -> str:
        return render_diff(self.path, self.old_text, self.new_text)


def plan(path: Path, scenario: str, entries: Sequence[Entry], *, why: str | None = None) -> Change:
    """The change recording ``entries`` makes to ``path`` (read and validated first; nothing written)."""
    current = load(path)
    old_text = read_text(path, "source") if current is not None else ""
    if current is not None and current.scenario != scenario:
        raise UserError(f"{path}: holds the baselines of scenario {current.scenario!r}, not {scenario!r}")
    kept = list(current.baselines) if current is not None else []
    for entry in entries:
        old = next((e for e in kept if e.key == entry.key), None)
        if old is not None:
            kept.remove(old)
            # bounded: the file is read with the scenario cap (1 MiB), so a history that grew with every recording
            # made the file unreadable and unrecordable once past it
            history = [_replaced(old, entry.recorded, why), *old.replaced][:MAX_REPLACED]
            entry = entry.model_copy(update={"replaced": history})
        kept.append(entry)
    return Change(path, old_text, BaselineFile(scenario=scenario, baselines=kept))


def apply(change: Change) -> None:
    save(change.path, change.new)
