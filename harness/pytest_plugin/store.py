"""``--store URL`` (or ``$SGLANG_REPRO_STORE``): record every scenario trial in the results store.

Wraps ``pytest_sglang_repro_run``, so a conftest's own runner is recorded too. Each pytest process
(each xdist worker) records into one batch of kind ``pytest``. A store that cannot be reached makes
the item an error naming the store (password redacted); the run's artifacts are already written.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

from harness.store.store import new_batch
from harness.store.url import STORE_ENV
from harness.store.writer import StoreWriter

_KEY = pytest.StashKey[StoreWriter]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("sglang-repro").addoption(
        "--store", default=None, metavar="URL",
        help=f"record each scenario trial in this results store (default: ${STORE_ENV}; none when unset)")


def pytest_configure(config: pytest.Config) -> None:
    url = config.getoption("--store") or os.environ.get(STORE_ENV)
    if url:
        config.stash[_KEY] = StoreWriter(url, new_batch("pytest"))


def pytest_unconfigure(config: pytest.Config) -> None:
    writer = config.stash.get(_KEY, None)
    if writer is not None:
        writer.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_sglang_repro_run(item: pytest.Item, **_: Any) -> Generator[None, Any, None]:
    outcome = yield
    writer = item.config.stash.get(_KEY, None)
    result = outcome.get_result()
    if writer is not None and result is not None:
        writer.record(result)
