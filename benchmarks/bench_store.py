"""The results store: ingest rate, and 8 processes x 200 results written at once, on SQLite and PostgreSQL.

    .venv/bin/python benchmarks/bench_store.py --pg postgresql+psycopg://postgres@127.0.0.1:PORT/postgres

Without ``--pg`` (or $SGLANG_REPRO_TEST_PG_URL) a throwaway PostgreSQL is started (tests/store/_postgres.py).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import emit  # also puts the repository root on sys.path, for harness and tests
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from harness.store.store import new_batch, open_store
from harness.store.writer import StoreWriter
from tests.helpers import make_record
from tests.store import _postgres

METRICS = {"accept_length": 1.8, "accept_length_server": 1.8, "output_throughput_tok_s": 200.0,
           "request_throughput_rps": 3.0, "ttft_ms_p50": 40.0, "itl_ms_p50": 9.0, "e2e_ms_p50": 300.0,
           "requests_ok": 8.0, "requests_failed": 0.0}


def _fresh_pg(server: str) -> str:
    name = f"b_{secrets.token_hex(5)}"
    eng = create_engine(server, isolation_level="AUTOCOMMIT")
    with eng.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    eng.dispose()
    return make_url(server).set(database=name).render_as_string(hide_password=False)


def _writer(url: str, proc: int, count: int) -> None:
    with StoreWriter(url, new_batch("pytest", f"p{proc}")) as w:
        for i in range(count):
            w.record(make_record(run_id=f"c{proc}-{i}", trial=i, metrics=METRICS))


def bench(url: str, label: str) -> dict[str, Any]:
    n = 2000
    with open_store(url) as store:
        t = time.perf_counter()
        store.record_many([make_record(run_id=f"bulk-{i}", trial=i, metrics=METRICS) for i in range(n)], new_batch("import"))
        bulk = n / (time.perf_counter() - t)
        t = time.perf_counter()
        batch = new_batch("run")
        for i in range(200):
            store.record(make_record(run_id=f"one-{i}", trial=i, metrics=METRICS), batch)
        single = 200 / (time.perf_counter() - t)
    ctx = multiprocessing.get_context("spawn")
    t = time.perf_counter()
    procs = [ctx.Process(target=_writer, args=(url, p, 200)) for p in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    conc = time.perf_counter() - t
    with open_store(url) as store:
        got = store.count_runs() - n - 200
    return {"store": label, "bulk_import_runs_per_s": round(bulk), "one_run_per_transaction_runs_per_s": round(single),
            "concurrent_8x200": {"stored": got, "of": 1600, "wall_s": round(conc, 2)}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pg", default=os.environ.get(_postgres.PG_ENV))
    ap.add_argument("--work", type=Path, default=None, help="unused; accepted like the other benchmarks")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        results.append(bench(str(Path(tmp) / "bench.db"), "SQLite (WAL)"))
        server = args.pg or _postgres.start(Path(tmp) / "pg")
        try:
            results.append(bench(_fresh_pg(server), "PostgreSQL"))
        finally:
            if not args.pg:
                _postgres.stop(Path(tmp) / "pg")
    emit({"question": "store write rates: bulk, one run per transaction, 8 concurrent writers",
          "load_1m": round(os.getloadavg()[0], 2), "stores": results}, args.out)


if __name__ == "__main__":
    main()
