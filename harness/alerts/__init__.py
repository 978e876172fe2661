"""Alerts: a confirmed change in a series (step, drift, level change) or an event (a new signature,
pass -> crash or fail), with a fingerprint so it fires once and the command that would find its culprit
(design.md, "Memory and search").

- :mod:`.alert`  the alert record, the alerts a case's history supports, those not yet known, the next step
"""

__all__ = ["alert"]
