"""What each configuration gave, by canonical digest: identical configurations never run twice.

A JSON file (``<out>/minimize/cache.json`` unless given): ``{"version": 1, "entries": {digest:
[observation, ...]}}``. The digest covers the build's identity and the harness version, so a
cached answer is only reused for the same build. The results store (``harness/store``) is the
intended home once it exists; until then this file is the cache (one writer at a time).
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict
from pathlib import Path

from harness.minimize.observation import Observation

__all__ = ["ObservationCache"]

_VERSION = 1


class ObservationCache:
    """Observations per digest, in memory, written through to ``path`` when one is given."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._entries: dict[str, list[Observation]] = {}
        if path is not None and path.is_file():
            try:
                raw = json.loads(path.read_text())
            except (OSError, ValueError):
                raw = {}  # an unreadable cache is an empty one: it only saves time
            if isinstance(raw, dict) and raw.get("version") == _VERSION:
                for digest, items in (raw.get("entries") or {}).items():
                    obs = [Observation.from_dict(item) for item in items if isinstance(item, dict)]
                    self._entries[str(digest)] = [o for o in obs if o is not None]

    def get(self, digest: str) -> list[Observation]:
        with self._lock:
            return list(self._entries.get(digest, ()))

    def add(self, digest: str, observation: Observation) -> None:
        with self._lock:
            self._entries.setdefault(digest, []).append(observation)
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.path.with_suffix(".tmp")
                data = {"version": _VERSION,
                        "entries": {d: [asdict(o) for o in obs] for d, obs in self._entries.items()}}
                tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
                tmp.replace(self.path)
