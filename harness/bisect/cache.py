"""Known trials per (revision, case): a bisection never pays twice for the same experiment.

The unit cached is the trial, not the verdict: a later search for another signature, the other
direction (``--find fix``) or a metric against other endpoint samples re-decides from the same
trials and adds only what it still needs. Keyed by the revision (commit id or release) and a digest
of the experiment (scenario file text, case name, build template). Without a results store the
cache is one JSON file, guarded by a file lock, beside the bisection reports
(``reports/bisect/trials-cache.json``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import filelock

from harness.bisect.oracle import Trial

__all__ = ["TrialCache", "experiment_key"]


def experiment_key(scenario_text: str, case_name: str, build_template: str) -> str:
    text = json.dumps([scenario_text, case_name, build_template])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class TrialCache:
    """Trials per ``(revision, experiment)`` in one JSON file; ``None`` path: a cache that forgets."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def _lock(self) -> filelock.FileLock:
        assert self.path is not None
        return filelock.FileLock(str(self.path) + ".lock", timeout=60)

    def _read(self) -> dict[str, list[dict[str, object]]]:
        assert self.path is not None
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, revision: str, experiment: str) -> list[Trial]:
        if self.path is None:
            return []
        with self._lock():
            entries = self._read().get(f"{revision}|{experiment}", [])
        trials = []
        for entry in entries:
            try:
                trials.append(Trial.from_dict(entry))
            except (KeyError, ValueError, TypeError):
                continue  # an entry from another version of the harness: ignore, never fail
        return trials

    def add(self, revision: str, experiment: str, trials: Sequence[Trial]) -> None:
        if self.path is None or not trials:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock():
            data = self._read()
            data.setdefault(f"{revision}|{experiment}", []).extend(t.to_dict() for t in trials)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
            tmp.replace(self.path)
