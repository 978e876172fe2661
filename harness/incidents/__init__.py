"""Incidents: the alerts one build change caused, across cases and metrics, with one state and one next step
(design.md, "Memory and search").

- :mod:`.incident`  alerts grouped into incidents; an incident as the store keeps it
- :mod:`.review`    after a batch is recorded: what is new, renamed and resolved tonight
"""

__all__ = ["incident", "review"]
