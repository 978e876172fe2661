"""Minimize: shrink a failing case (flags, environment, workload) while the same failure reproduces.

``atoms`` (what can be taken away), ``defaults`` (the build's own flag defaults), ``ddmin`` (the
search algorithms), ``observation`` and ``oracle`` (is it still the same failure? every run recorded
in the results store, known ones reused), ``search`` (the steps in order) and ``output`` (the minimal
YAML, the launch line, the curl, the table).
"""

from harness.minimize.search import MinimizeOptions, MinimizeResult, minimize

__all__ = ["MinimizeOptions", "MinimizeResult", "minimize"]
