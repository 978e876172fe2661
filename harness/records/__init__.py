"""The typed records between stages. The face names the modules, not their contents: every layer reads them, each
by its own name (``from harness.records.outcome import Outcome``).

- :mod:`.outcome`             a run's outcomes and phases, and every set and order of outcomes the harness uses
- :mod:`.run_record`          the run record (``result.json``): one case x one build x one trial
- :mod:`.metric_definitions`  the metrics a run records, each defined once (name, unit, direction, tolerance)
- :mod:`.request_log`         one request's raw record and ``requests.jsonl``
- :mod:`.manifest`            what a workload was, so only like is compared with like
- :mod:`.artifacts`           a run's artifact folder
"""

__all__ = ["artifacts", "manifest", "metric_definitions", "outcome", "request_log", "run_record"]
