"""``triton.backends`` stand-in: no backend, so torch's ``has_triton()`` finds none for the CPU."""

from __future__ import annotations

from typing import Any

from _sglang_repro_placeholders import install_finder, module_getattr

__all__ = ["backends"]

backends: dict[str, Any] = {}
install_finder(__name__)
__getattr__ = module_getattr(__name__)
