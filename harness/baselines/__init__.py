"""Recorded baselines (``fixtures/baselines/<scenario>.yaml``) and the checks judged against them.

- :mod:`.model`  the file format: an entry per case x hardware x build line, figures as mean and spread
- :mod:`.files`  reading (strict, file:line errors) and writing (stable, atomic, diffable)
- :mod:`.keys`   the hardware key and the build line a run is judged by
- :mod:`.check`  the band: a one-sided pooled t test at a stated false-failure rate
- :mod:`.judge`  an item's trials against an entry: a verdict per figure and draft position
- :mod:`.record` trials summarised into an entry, merged into the file keeping what it replaced
"""
