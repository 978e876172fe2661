"""``triton.runtime.cache`` stand-in: torch Inductor reads ``triton_key()`` into its cache key (torch 2.13.0
``torch/_inductor/codecache.py:280-289``) whenever triton imports, even for a CPU graph."""

from __future__ import annotations

from triton.knobs import cache as knobs_cache

__all__ = ["knobs", "triton_key"]

knobs = type("knobs", (), {"cache": knobs_cache})


def triton_key() -> str:
    return "sglang-cpu-standin"
