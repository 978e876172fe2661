"""Crash signatures: the catalogue and how much of a signature's call path a traceback shows (triage judges with it)."""
