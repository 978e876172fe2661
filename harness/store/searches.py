"""The memory of a search (bisect, minimize): every run it makes is a run record in the store.

A search names what it asks a run to answer with a key (:func:`search_key`): a digest of the build's
identity as the search names it (a commit, a release, a resolved build) and of the experiment (what
runs). Each run is recorded under that key, in the search's batch (kind ``bisect`` or ``minimize``,
labelled with the search); a later search asks the store for the runs of that key made by the same
harness version, so a search interrupted and run again pays only for what is new. Without a store
(``url`` None) nothing is recorded and nothing is known.

The store is opened for each question and each record, not held: a bisection's step is a process of
its own, and a minimization's parallel candidates record from several threads; SQLite serialises
their writes, PostgreSQL takes them as they come.
"""

from __future__ import annotations

import hashlib
import json

from harness.records.run_record import RunRecord
from harness.store.store import Batch, open_store
from harness.version import harness_version

__all__ = ["SearchRuns", "search_key"]


def search_key(build_identity: object, experiment: object) -> str:
    """The key of one question a search asks: a build (as the search names it) and an experiment."""
    text = json.dumps([build_identity, experiment], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class SearchRuns:
    """The runs of one search, in the store at ``url`` (None: a search that records and knows nothing)."""

    def __init__(self, url: str | None, batch: Batch) -> None:
        self.url = url
        self.batch = batch

    def known(self, key: str) -> list[RunRecord]:
        """The runs recorded under ``key`` by this harness version, oldest first."""
        if self.url is None:
            return []
        with open_store(self.url) as store:
            return store.searched(key, harness_version())

    def record(self, key: str, record: RunRecord) -> None:
        """Record one run under ``key`` (InfraError naming the store when it cannot)."""
        if self.url is None:
            return
        with open_store(self.url) as store:
            store.record(record, self.batch, search_key=key)
