"""``triton.runtime.driver`` stand-in: no backend is active, as with real triton on a machine without a GPU.

SGLang asks ``triton.runtime.driver.active`` for device properties on some paths and falls back to the CPU
when it raises (0.5.23 ``kernels/ops/attention/fla/utils.py:265``); real triton raises this ``RuntimeError``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DriverConfig", "driver"]


class DriverConfig:
    def __init__(self) -> None:
        self._default: Any = None

    @property
    def active(self) -> Any:
        raise RuntimeError("0 active drivers ([]). There should only be one.")

    @property
    def default(self) -> Any:
        return self.active

    def set_active(self, driver: Any) -> None:
        raise RuntimeError("triton stand-in (real-SGLang CPU build): no GPU driver to activate")

    def reset_active(self) -> None:
        return None


driver = DriverConfig()
