"""The stand-in's scheduler child: the reference server's batching and its #28264 condition, tokens by a cheap rule.

The same loop and pipe protocol as harness.sim.scheduler (harness.sim.scheduler_entry.SchedulerLoop), the same
request state and ``meta_info`` (harness.sim.req_state), the same ``/server_info`` counters
(harness.sim.metrics_reporter) and ground-truth keys. What differs: a token is a hash of the prompt and its
position (printable bytes, never EOS), the prefix cache is a list of finished sequences, and a verify step
accepts ``--sim-draft-agreement`` of the chain by error diffusion (every trial close to the same acceptance)
instead of by comparing a draft head with a target. The batching follows the reference server's: a prefill
batch that is neither merged nor filtered hands its ``out_cache_loc`` (one slot per extended token) to the
draft, and at ``pre-fix`` the eager draft path copies it into ``bs``-long buffers (harness.sim.standin.model_runner).
The method names ``run_decode`` and the line ``cost = s.step_cost_ms / 1000.0`` are where the generated history
(harness.bisect.demo_repo) turns its knobs, as in the reference server's scheduler.
"""

from __future__ import annotations

import logging
import os  # noqa: F401  (the generated history's random-crash snippet in run_decode calls os.urandom)
import time
import zlib
from multiprocessing.connection import Connection

from harness.sim import SIM_LABEL
from harness.sim.metrics_reporter import MetricsReporter
from harness.sim.position_drop import PositionDrop
from harness.sim.req_state import Req
from harness.sim.scheduler_entry import SchedulerLoop
from harness.sim.server_settings import SchedulerSettings, chain_length
from harness.sim.standin.model_runner import DraftRunner
from harness.sim.tokenizer import EOS_ID

__all__ = ["StandinScheduler"]

logger = logging.getLogger(__name__)

_MAX_CACHED_SEQUENCES = 256


def _token(prompt_hash: int, position: int) -> int:
    """A printable byte, the same for the same prompt and position (greedy decoding is deterministic too)."""
    return 32 + (prompt_hash * 1_103_515_245 + position * 12_345) % 95


class StandinScheduler(SchedulerLoop):
    def __init__(self, settings: SchedulerSettings, out: Connection) -> None:
        s = self.s = settings
        self.out = out
        self._refuse_unmodelled()
        self.waiting: list[Req] = []
        self.running: list[Req] = []
        self.chunked_req: Req | None = None
        self.reset_stats()
        self.metrics_reporter = MetricsReporter(settings.decode_log_interval)
        self.chain_len = chain_length(s.num_steps, s.topk, s.num_draft_tokens) if s.speculative else 0
        self.topk = s.topk if s.speculative else 1
        self._accept_due = 0.0
        self._cache: list[tuple[int, ...]] = []  # finished sequences, newest last (the radix cache's stand-in)
        self._hashes: dict[str, int] = {}
        cost = s.step_cost_ms / 1000.0
        self.target_cost_s = cost
        self.draft_model_runner = DraftRunner(cost / 10.0)
        self.capture_bs = min(s.cuda_graph_max_bs, s.max_running_requests)
        logger.info("%s stand-in scheduler (no model, no torch: harness.sim.standin), revision %s, draft path %s",
                    SIM_LABEL, s.revision, "none" if not s.speculative else ("eager" if s.eager_draft else "graph"))
        self.position_drop = PositionDrop(s.position_drop, logger)  # the model's rule and line

    def _refuse_unmodelled(self) -> None:
        s = self.s
        if (s.speculative and s.revision == "pre-fix" and not s.eager_draft and s.hybrid_swa
                and s.draft_attention_backend == "trtllm_mha" and s.rules.refills):
            raise RuntimeError("the stand-in does not model the CUDA-graph draft's SWA refill (trtllm_mha, hybrid "
                               "SWA, pre-fix); run this case on the reference server (--sim-scheduler model)")
        if s.draft_cache == "pre-fix" and s.hicache:
            raise RuntimeError("the stand-in does not model HiCache's draft view (--sim-draft-cache pre-fix); run "
                               "this case on the reference server (--sim-scheduler model)")

    def reset_stats(self) -> bool:
        if getattr(self, "running", None) or getattr(self, "waiting", None) or getattr(self, "chunked_req", None):
            return False
        self._first_arrival: float | None = None
        self._last_finish: float | None = None
        self.stats = {"completion_tokens": 0, "prompt_tokens": 0, "verify_steps": 0, "accepted_drafts": 0,
                      "proposed_drafts": 0, "requests": 0, "busy_s": 0.0, "forward_steps": 0, "draft_steps": 0,
                      "cached_tokens": 0}
        return True

    # -- requests ---------------------------------------------------------------------------
    def _budget(self, r: Req) -> int:
        scratch = (self.topk * (self.chain_len + 1) + self.chain_len + 1) if self.s.speculative else 1
        return len(r.input_ids) + r.max_new_tokens + scratch

    def add_request(self, msg: dict) -> None:
        p = msg["sampling_params"]
        r = Req(rid=msg["rid"], input_ids=list(msg["input_ids"]), max_new_tokens=int(p["max_new_tokens"]),
                temperature=float(p["temperature"]), ignore_eos=bool(p["ignore_eos"]),
                stop_token_ids=tuple(p.get("stop_token_ids") or (EOS_ID,)),
                count_in_stats=bool(msg.get("count_in_stats", True)))
        if self._budget(r) > self.s.max_total_tokens or len(r.input_ids) + r.max_new_tokens > self.s.context_length:
            r.finish_reason = {"type": "abort", "message": (
                f"The request needs {len(r.input_ids)} prompt + {r.max_new_tokens} new tokens; the reference server's "
                f"limits are context_length={self.s.context_length}, max_total_tokens={self.s.max_total_tokens}")}
            self._send(r)
            return
        seed = p.get("seed") if r.temperature > 0 else None
        self._hashes[r.rid] = zlib.crc32(repr((r.input_ids, seed)).encode())
        if r.count_in_stats and self._first_arrival is None:
            self._first_arrival = time.monotonic()
        self.waiting.append(r)

    def abort(self, rid: str) -> None:
        for queue in (self.waiting, self.running):
            for r in list(queue):
                if r.rid == rid:
                    queue.remove(r)
                    self._finish_abort(r)
        if self.chunked_req is not None and self.chunked_req.rid == rid:
            r, self.chunked_req = self.chunked_req, None
            self._finish_abort(r)

    def _finish_abort(self, r: Req) -> None:
        r.finish_reason = {"type": "abort", "message": "aborted"}
        self._hashes.pop(r.rid, None)
        self._send(r)

    def _send(self, r: Req) -> None:
        self.out.send(("out", r.rid, r.output_ids[r.sent_len:], r.meta_info(self.s.speculative), r.finish_reason))
        r.sent_len = len(r.output_ids)

    def _append(self, r: Req, count: int) -> None:
        h = self._hashes.get(r.rid, 0)
        for _ in range(count):
            r.output_ids.append(_token(h, len(r.input_ids) + len(r.output_ids)))
            if r.count_in_stats:
                self.stats["completion_tokens"] += 1
            if len(r.output_ids) >= r.max_new_tokens:
                r.finish_reason = {"type": "length", "length": r.max_new_tokens}
                break

    def _match(self, r: Req) -> None:
        """The longest cached prefix of the prompt but its last token (one token is always computed)."""
        if not self.s.radix_cache:
            return
        want = r.input_ids[: max(len(r.input_ids) - 1, 0)]
        best = 0
        for seq in self._cache:
            n = 0
            for a, b in zip(seq, want):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        r.seq_len = r.cached_tokens = best

    def _release(self, r: Req) -> None:
        self._hashes.pop(r.rid, None)
        if self.s.radix_cache:
            self._cache.append(tuple((r.input_ids + r.output_ids)[: r.seq_len]))
            del self._cache[:-_MAX_CACHED_SEQUENCES]

    # -- one iteration ------------------------------------------------------------------------
    def _target_forward(self) -> None:
        self.stats["forward_steps"] += 1
        if self.target_cost_s > 0:
            time.sleep(self.target_cost_s)

    def run_prefill(self, batch: list[tuple[Req, int]]) -> None:
        extended = 0
        for r, take in batch:
            if r.seq_len == r.cached_tokens and r.count_in_stats:  # its first chunk
                self.stats["prompt_tokens"] += len(r.input_ids)
                self.stats["cached_tokens"] += r.cached_tokens
            r.seq_len += take
            extended += take
        self._target_forward()
        done = [r for r, _ in batch if r is not self.chunked_req]
        for r in done:
            self._append(r, 1)
        # As the reference server (and SGLang 0.5.14 :2599-2625): the batch keeps its out_cache_loc (one slot per
        # extended token) only when it becomes the running batch unfiltered and unmerged.
        merged = bool(self.running)
        filtered = len(done) < len(batch) or any(r.finish_reason is not None for r in done)
        self.running.extend(done)
        alive = [r for r in done if r.finish_reason is None]
        if self.s.speculative and alive:
            self._draft(alive, None if merged or filtered else extended)

    def _draft(self, reqs: list[Req], stale: int | None) -> None:
        bs = len(reqs) * self.topk
        self.draft(bs, stale)
        self.stats["draft_steps"] += self.chain_len

    def draft(self, bs: int, stale: int | None) -> None:
        if self.s.revision == "post-fix":
            stale = None  # the fix (sglang PR #29616): the frozen draft carries no slots
        eager = self.s.eager_draft or bs // self.topk > self.capture_bs
        self.draft_forward(bs, stale, eager)

    def draft_forward(self, bs: int, stale: int | None, eager: bool) -> None:
        for _ in range(self.chain_len):
            if eager:  # the graph path replays a capture that has no out_cache_loc buffer, and costs no step
                self.draft_model_runner.forward(bs, stale)

    def _accepted(self) -> int:
        """Drafts accepted at one verify step: ``draft_agreement`` of the chain, spread evenly over the steps."""
        self._accept_due += self.s.draft_agreement * self.chain_len
        a = min(self.chain_len, int(self._accept_due))
        self._accept_due -= a
        return self.position_drop.cut(a)

    def run_decode(self) -> None:
        reqs = self.running
        self._target_forward()
        if not self.s.speculative:
            for r in reqs:
                r.seq_len += 1
                self._append(r, 1)
            return
        accepted = [self._accepted() for _ in reqs]
        self.metrics_reporter.on_decode_batch(sum(accepted), len(reqs))
        for r, a in zip(reqs, accepted):
            self._append(r, a + 1)
            r.seq_len += a + 1
            r.verify_ct += 1
            r.accepted_drafts += a
            r.proposed_drafts += self.chain_len
            if len(r.accept_histogram) <= a:
                r.accept_histogram.extend([0] * (a + 1 - len(r.accept_histogram)))
            r.accept_histogram[a] += 1
            if r.count_in_stats:
                self.stats["verify_steps"] += 1
                self.stats["accepted_drafts"] += a
                self.stats["proposed_drafts"] += self.chain_len
        alive = [r for r in reqs if r.finish_reason is None]
        if alive:
            self._draft(alive, len(alive))  # the verify step's last kept slot per request

    # -- ground truth -------------------------------------------------------------------------
    def snapshot(self) -> dict[str, object]:
        stats = self.stats
        st: dict[str, object] = dict(stats)
        st["accept_length"] = stats["completion_tokens"] / stats["verify_steps"] if stats["verify_steps"] else None
        st["accept_rate"] = stats["accepted_drafts"] / stats["proposed_drafts"] if stats["proposed_drafts"] else None
        st["server_accept_length"] = self.metrics_reporter.avg_spec_accept_length()
        st["revision"] = self.s.revision
        st["running"] = len(self.running)
        st["waiting"] = len(self.waiting)
        st["speculative"] = self.s.speculative
        st["draft_path"] = None if not self.s.speculative else ("eager" if self.s.eager_draft else "graph")
        st["draft_kv_writes"] = 0
        held = sum(r.seq_len for r in self.running) + sum(len(seq) for seq in self._cache)
        st["free_kv_slots"] = max(self.s.max_total_tokens - held, 0)
        st["prefix_cache"] = None if not self.s.radix_cache else {
            "device_tokens": sum(len(seq) for seq in self._cache), "evicted_tokens": 0, "loaded_back_tokens": 0,
            "host_tokens": 0 if self.s.hicache else None}
        st["gen_throughput"] = stats["completion_tokens"] / stats["busy_s"] if stats["busy_s"] else 0.0
        span = (self._last_finish - self._first_arrival) if self._first_arrival and self._last_finish else None
        st["span_s"] = span
        st["span_throughput"] = stats["completion_tokens"] / span if span else None
        st["scheduler"] = "standin"
        return st

    def flush_cache(self) -> bool:
        if self.has_work():
            return False
        self._cache.clear()
        self.metrics_reporter.reset_metrics()
        return True
