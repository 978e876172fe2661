"""The scheduler's speculative-decoding counters behind ``/server_info`` ``avg_spec_accept_length``.

Mirrors ``sglang/srt/managers/scheduler_components/metrics_reporter.py`` (0.5.14): every decode batch
adds its accepted tokens (accepted drafts + one bonus per request, :348) and its requests (:349) to a
window; every ``decode_log_interval`` decode batches (40 by default, :674) the window is folded into
the totals (:723-724), and ``avg_spec_accept_length`` is totals' ratio (scheduler.py :3687), absent
until the first fold. ``/flush_cache`` resets all of it (scheduler.py :3649 -> ``reset_metrics``,
:487-493; 0.5.15 :3737). Every request counts: warm-ups, health checks, every client's.
"""

from __future__ import annotations

__all__ = ["MetricsReporter"]


class MetricsReporter:
    def __init__(self, decode_log_interval: int) -> None:
        self.decode_log_interval = max(1, decode_log_interval)
        self.reset_metrics()

    def reset_metrics(self) -> None:
        self.forward_ct_decode = 0
        self.spec_num_accept_tokens = 0
        self.spec_num_forward_ct = 0
        self.spec_total_num_accept_tokens = 0
        self.spec_total_num_forward_ct = 0

    def on_decode_batch(self, num_correct_drafts: int, bs: int) -> None:
        self.forward_ct_decode += 1
        self.spec_num_accept_tokens += num_correct_drafts + bs
        self.spec_num_forward_ct += bs
        if self.forward_ct_decode % self.decode_log_interval != 0:
            return
        self.spec_total_num_accept_tokens += self.spec_num_accept_tokens
        self.spec_total_num_forward_ct += self.spec_num_forward_ct
        self.spec_num_accept_tokens = self.spec_num_forward_ct = 0

    def avg_spec_accept_length(self) -> float | None:
        if self.spec_total_num_forward_ct <= 0:
            return None
        return self.spec_total_num_accept_tokens / self.spec_total_num_forward_ct
