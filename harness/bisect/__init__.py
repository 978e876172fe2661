"""Bisection: the commit or release that broke something (or fixed it), found with an oracle that says
bad only for the failure searched. Modules: ``worktree`` (the guarded temporary linked worktree),
``guard`` (its watchdog), ``oracle`` (good / bad / skip from trials), ``sequential`` (the metric test),
``endpoints`` (both ends verified first), ``probe`` (one revision; its trials are run records in the
results store, known ones reused), ``step`` (the script ``git bisect run`` calls), ``session`` (commits),
``releases``, ``report``, ``run``."""
