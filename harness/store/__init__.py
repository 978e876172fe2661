"""The results store (design.md, "store"): run records across runs in SQLite or PostgreSQL.

- :mod:`.url`         where the store lives (``--store``, ``$SGLANG_REPRO_STORE``, the project's default), redacted
- :mod:`.store`       the open store: record runs in batches, read them back as typed records
- :mod:`.schema`      its tables; :mod:`.migrations` the steps between their versions
- :mod:`.writer`      a command's records written as they arrive (deferred while a run holds the terminal)
- :mod:`.searches`    the runs a search (bisect, minimize) recorded, found again by what they were asked
- :mod:`.transfer`    run folders imported, the store exported (parquet, csv, HUD)

Names are imported on first use (:mod:`harness.util.face`): a path check does not load SQLAlchemy's engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.util.face import lazy_face

if TYPE_CHECKING:
    from harness.store.schema import RESOLUTIONS, RUN_KINDS
    from harness.store.searches import SearchRuns, search_key
    from harness.store.store import Batch, Store, check_sqlite_file, new_batch, open_store
    from harness.store.transfer import EXPORT_FORMATS, export_store, import_folders
    from harness.store.url import STORE_ENV, default_store, redact_url, store_url
    from harness.store.writer import DeferredWriter, StoreWriter, finish_store, record_run

__all__ = ["EXPORT_FORMATS", "RESOLUTIONS", "RUN_KINDS", "STORE_ENV", "Batch", "DeferredWriter", "SearchRuns", "Store",
           "StoreWriter", "check_sqlite_file", "default_store", "export_store", "finish_store", "import_folders",
           "new_batch", "open_store", "record_run", "redact_url", "search_key", "store_url"]
__getattr__ = lazy_face(__name__)
