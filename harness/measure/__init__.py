"""Figures from a run: client-side metrics from request records, server-side ones, statistics."""
