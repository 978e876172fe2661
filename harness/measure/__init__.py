"""Figures from a run and what they are judged by: client-side metrics from request records, server-side ones,
statistics, and the judge of a run (or a role's trials) against its expectation (:mod:`.expectation`)."""
