"""Series: one (scenario, case, metric, hardware) over builds in order, and the changes found in it
(design.md, "Memory and search").

- :mod:`.points`      the series read from the store: a point per build and night, its trials and outcome
- :mod:`.steps`       the sequential detector: steps, drift, level changes renamed in place, a suspicious tail
- :mod:`.screen`      every series screened at once for the nights on which the detector could decide
- :mod:`.detections`  each series' findings, the detector's state cached in the store
- :mod:`.transients`  an excursion that came back within a few nights (recorded, reaches no one)
- :mod:`.young`       a series too young to judge a change of the size that matters, and what it can judge

What a person is told about a finding is :mod:`harness.alerts`; the alerts one change caused, and their
states, :mod:`harness.incidents`. The package face names the modules, not their contents: the detector
alone imports no store.
"""

__all__ = ["detections", "points", "screen", "steps", "transients", "young"]
