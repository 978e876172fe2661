"""The hook the writers call (``run``, ``compare``, ``nightly``, the pytest plugin) once a run is final.

The store is opened on the first record, not before the run: a store that cannot be reached
must not stop a run from producing its artifacts, it makes the command end as ``infra`` afterwards,
naming the store (password redacted).
"""

from __future__ import annotations

import sys

from harness.records.run_record import RunRecord
from harness.store.store import Batch, Store, new_batch, open_store
from harness.util.errors import EXIT_INFRA, InfraError

__all__ = ["DeferredWriter", "StoreWriter", "finish_store", "record_run"]


class StoreWriter:
    """Records the runs of one batch into one store; opens it lazily, closes with ``close``."""

    def __init__(self, url: str, batch: Batch) -> None:
        self.url = url
        self.batch = batch
        self._store: Store | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = open_store(self.url)
        return self._store

    def record(self, record: RunRecord) -> bool:
        """Record one run (InfraError naming the store when it cannot); False if it was already there."""
        return self.store.record(record, self.batch)

    def close(self) -> None:
        if self._store is not None:
            from harness.util.interrupts import Shield

            # Uncut by a signal: a Ctrl-C inside the pool's close is logged by SQLAlchemy with a traceback
            # ("Exception closing connection"); a close is short, and a signal then changes nothing.
            with Shield(reraise=False):
                self._store.close()
            self._store = None

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def record_run(store_url: str, record: RunRecord, *, kind: str = "run", batch: Batch | None = None) -> bool:
    """Record one run in the store at ``store_url``, in ``batch`` (a new one of ``kind`` by default)."""
    with StoreWriter(store_url, batch or new_batch(kind)) as writer:
        return writer.record(record)


class DeferredWriter(StoreWriter):
    """For commands that must finish their runs whatever the store does: the first failure is kept
    (``error``) and later records are skipped; the command reports it and exits ``infra`` at the end."""

    def __init__(self, url: str | None, batch: Batch) -> None:
        super().__init__(url or "", batch)
        self.enabled = url is not None
        self.error: InfraError | None = None

    def record(self, record: RunRecord) -> bool:
        if not self.enabled or self.error is not None:
            return False
        try:
            return super().record(record)
        except InfraError as exc:
            self.error = exc
            return False


def finish_store(writer: DeferredWriter, exit_code: int) -> int:
    """The command's exit code once the store has had its say: a store that failed makes it infra."""
    writer.close()
    if writer.error is None:
        return exit_code
    print(f"sglang-repro: {writer.error} (the run artifacts are written)", file=sys.stderr)
    return EXIT_INFRA
