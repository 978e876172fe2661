"""sglang-repro: a reproduction and regression harness for SGLang servers.

The words used across the package (scenario, build, run, outcome, signature, expectation) are defined in the
project's design notes (docs/design.md); each has its own module.

For scripts, three calls (docs/commands.md, "From Python")::

    import harness

    loaded = harness.load_scenario("scenarios/frozen_kv_mtp/long_prompt_stale_out_cache_loc.yaml")
    record = harness.run_case(loaded.cases[0], "sim:post-fix", store="results.db")
    with harness.open_store("results.db") as store:
        print([r.outcome for r in store.records()])

Each imports what it needs when called, so ``import harness`` (which every module of the package runs first)
stays as cheap as the CLI's start-up needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from harness.records.run_record import RunRecord
    from harness.scenario import Case, LoadedScenario
    from harness.store.store import Store

__version__ = "0.1.0"

__all__ = ["__version__", "load_scenario", "open_store", "run_case"]


def load_scenario(path: str | Path) -> LoadedScenario:
    """A scenario file validated strictly and its matrix expanded (``.cases``); ScenarioError naming every problem
    (file:line) otherwise, as ``sglang-repro validate`` prints them."""
    from harness.scenario import load_file

    return load_file(path)


def run_case(case: Case, build: str, *, role: str | None = None, trial: int = 0, out_root: str | Path | None = None,
             store: str | None = None) -> RunRecord:
    """Run ``case`` once on ``build`` (a spec, e.g. ``sim:post-fix`` or ``pip:sglang==0.5.21``) as ``sglang-repro
    run`` does: the server started, driven and torn down, the outcome decided, ``result.json`` and the artifacts
    written under ``out_root`` (``reports/`` of the project by default); then recorded in ``store`` (a path or URL)
    when one is given. Raises UserError for a bad spec and ``harness.pipeline.RunInterrupted`` (its record written)
    after SIGINT or SIGTERM."""
    from pathlib import Path

    from harness.pipeline import RunOptions, execute_run

    record = execute_run(case, build, role=role, trial=trial,
                         options=RunOptions(out_root=Path(out_root) if out_root is not None else None))
    if store is not None:
        from harness.store.writer import record_run

        record_run(store, record)
    return record


def open_store(url: str | None = None) -> Store:
    """The results store at ``url`` (a path is an SQLite file; ``postgresql+psycopg://...``), else the default
    (``$SGLANG_REPRO_STORE``, the project's, ``reports/results.db``); created or upgraded as needed. Close it, or
    use it in a ``with`` block."""
    from harness.store.store import open_store as _open
    from harness.store.url import default_store

    return _open(url if url is not None else default_store())
