"""The stand-in's draft model runner: the reference server's call path to ``fill_from``, with its frame names.

``forward -> _forward_raw -> forward_decode -> _eager_fb_view -> fill_from``, as harness.sim.model_runner (and
SGLang's model_runner.py), so that a stale ``out_cache_loc`` fails with the same signature. A draft step costs
a tenth of a target step, as in the reference server.
"""

from __future__ import annotations

import time

from harness.sim.standin.cuda_graph_buffer_registry import fill_from

__all__ = ["DraftRunner"]


class DraftRunner:
    """Runs one eager draft step over ``bs`` rows whose ``out_cache_loc`` has ``stale`` entries (None: none)."""

    def __init__(self, step_cost_s: float) -> None:
        self.step_cost_s = step_cost_s

    def forward(self, bs: int, stale: int | None) -> None:
        self._forward_raw(bs, stale)
        if self.step_cost_s > 0:
            time.sleep(self.step_cost_s)

    def _forward_raw(self, bs: int, stale: int | None) -> None:
        self.forward_decode(bs, stale)

    def forward_decode(self, bs: int, stale: int | None) -> None:
        self._eager_fb_view(bs, stale)

    def _eager_fb_view(self, bs: int, stale: int | None) -> None:
        fill_from({"input_ids": bs, "positions": bs, "seq_lens": bs, "req_pool_indices": bs, "out_cache_loc": stale}, bs)
