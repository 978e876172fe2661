"""The scheduler child process: continuous batching over the tiny target and its Frozen-KV MTP draft.

It owns torch. Each loop iteration admits waiting requests into one prefill (extend) batch, or
runs one decode round for every running request (verify the drafted branches, then draft again).
One radix prefix cache (harness.sim.radix_cache) serves both modelled bugs: a request extends only what
its cached prefix leaves, chunk by chunk past ``--chunked-prefill-size`` (the out_cache_loc of #28264), and
a HiCache hit is loaded back into fresh device slots, the draft's view with it only at
``--sim-draft-cache post-fix`` (#32176).
Its message loop and its life as a process are harness.sim.scheduler_entry's (shared with the torch-free
stand-in, harness.sim.standin): an exception is logged with its traceback and the process exits 1; the front
process sees the pipe close and takes the tree down, as SGLang does.
"""

from __future__ import annotations

import logging
import os  # noqa: F401  (the generated history's random-crash snippet in run_decode calls os.urandom)
import time
import zlib
from multiprocessing.connection import Connection

import torch

from harness.sim import SIM_LABEL
from harness.sim.batch_models import DraftBatchModel, TargetBatchModel
from harness.sim.cuda_graph_buffer_registry import BUFFER_FIELDS, CudaGraphBufferRegistry
from harness.sim.forward_batch import ForwardBatch, ForwardMode, SeqSpan
from harness.sim.frozen_kv_mtp_worker import FrozenKVMTPWorker
from harness.sim.memory_pool import KVPool, ReqToTokenPool, TokenToKVPoolAllocator
from harness.sim.metrics_reporter import MetricsReporter
from harness.sim.model import FrozenKVDraftHead, TinyTransformer
from harness.sim.model_runner import GraphLikeRunner, ModelRunner
from harness.sim.radix_cache import HostPool, RadixCache
from harness.sim.req_state import Req
from harness.sim.sampling import sample
from harness.sim.scheduler_entry import SchedulerLoop
from harness.sim.server_settings import SchedulerSettings
from harness.sim.tokenizer import EOS_ID
from harness.sim.triton_backend import make_attn_backend

__all__ = ["Scheduler"]

logger = logging.getLogger(__name__)

class Scheduler(SchedulerLoop):
    def __init__(self, settings: SchedulerSettings, out: Connection) -> None:
        self.s = settings
        self.out = out
        self.device = torch.device(settings.device)
        # Tiny ops: intra-op threads only add synchronisation cost, badly so on a busy 2-core CI box.
        torch.set_num_threads(1)
        torch.manual_seed(settings.seed)
        self.waiting: list[Req] = []
        self.running: list[Req] = []
        # The request whose prompt is being prefilled chunk by chunk (SGLang's scheduler.chunked_req): it
        # holds slots but joins the running batch only with its last chunk.
        self.chunked_req: Req | None = None
        self.reset_stats()
        self.metrics_reporter = MetricsReporter(settings.decode_log_interval)  # what /server_info reports
        self.worker: FrozenKVMTPWorker | None = None
        self.init_model_worker()

    def reset_stats(self) -> bool:
        """Start a new ground-truth window (a trial on a server shared between trials); refused in flight."""
        if getattr(self, "running", None) or getattr(self, "waiting", None) or getattr(self, "chunked_req", None):
            return False
        self._first_arrival: float | None = None
        self._last_finish: float | None = None
        self.stats = {"completion_tokens": 0, "prompt_tokens": 0, "verify_steps": 0, "accepted_drafts": 0,
                      "proposed_drafts": 0, "requests": 0, "busy_s": 0.0, "forward_steps": 0, "draft_steps": 0,
                      "cached_tokens": 0}
        return True

    # -- start-up, in SGLang's order ------------------------------------------------------
    def init_model_worker(self) -> None:
        # sglang 0.5.14 allocates the target's memory pool early for Frozen-KV MTP (scheduler.py :826-834,
        # :862) and the draft worker then finds the pool it binds to: nothing fails at start-up (#29021
        # is the CUDA-graph draft crash of harness.sim.trtllm_mha_backend, at the first decode).
        self.init_tp_model_worker()
        self.maybe_init_draft_worker()
        self.init_memory_pools()

    def init_tp_model_worker(self) -> None:
        s = self.s
        self.model = TinyTransformer(s.target, seed=s.seed, device=self.device)
        logger.info("%s Load weight end. type=%s (tiny random weights), layers=%s, sliding_window=%d",
                    SIM_LABEL, s.target.architecture, ",".join(t.split("_")[0] for t in s.target.layer_types),
                    s.target.sliding_window)

    def maybe_init_draft_worker(self) -> None:
        s = self.s
        if s.speculative:
            assert s.draft is not None
            self.draft_head = FrozenKVDraftHead(self.model, s.draft, s.draft_agreement, seed=s.seed)

    def init_memory_pools(self) -> None:
        s = self.s
        self.req_pool = ReqToTokenPool(s.max_running_requests + 1, s.context_length + 64, self.device)
        self.allocator = TokenToKVPoolAllocator(s.max_total_tokens, self.device)
        self.pool = KVPool(s.target.num_layers, s.max_total_tokens, s.target.num_attention_heads,
                           s.target.head_dim, self.device)
        topk = s.topk if s.speculative else 1
        cost = s.step_cost_ms / 1000.0
        target_model = TargetBatchModel(self.model, self.pool, self.req_pool)
        target_graph = None if s.disable_cuda_graph else GraphLikeRunner(
            target_model, s.cuda_graph_max_bs, BUFFER_FIELDS, self.device)
        self.target_runner = ModelRunner(target_model, CudaGraphBufferRegistry(s.max_running_requests, self.device),
                                         target_graph, cost)
        logger.info("%s KV pool: %d token slots, %d request slots, max_running_requests=%d",
                    SIM_LABEL, s.max_total_tokens, s.max_running_requests, s.max_running_requests)
        self.init_tree_cache()
        if not s.speculative:
            return
        draft_model = DraftBatchModel(self.draft_head, self.pool, self.req_pool)
        self.draft_runner = ModelRunner(draft_model,
                                        CudaGraphBufferRegistry(s.max_running_requests * topk, self.device),
                                        None, cost / 10.0)
        self.worker = FrozenKVMTPWorker(
            target_runner=self.target_runner, draft_runner=self.draft_runner, pool=self.pool,
            req_pool=self.req_pool, allocator=self.allocator, revision=s.revision, num_steps=s.num_steps,
            topk=topk, num_draft_tokens=s.num_draft_tokens, device=self.device,
            draft_attn_backend=make_attn_backend(s.draft_attention_backend, s.hybrid_swa, self.device,
                                                 s.rules.swa_refill),
            position_drop=s.position_drop)
        if s.eager_draft:
            logger.info("%s draft CUDA graph skipped (CUDA graphs disabled or --speculative-num-steps <= %d, "
                        "%s's rule): the draft runs the eager path", SIM_LABEL, s.rules.eager_max_steps, s.rules.name)
            return
        # SGLang's capture sizes stop at the request pool's size (base_cuda_graph_runner.py :84-91).
        max_bs = min(s.cuda_graph_max_bs, s.max_running_requests)
        self.worker.capture_cuda_graph(draft_model, max_bs)
        logger.info("%s Capture draft cuda graph end (modelled). bs up to %d, draft attention backend %s%s",
                    SIM_LABEL, max_bs, s.draft_attention_backend, " with a hybrid SWA KV pool" if s.hybrid_swa else "")

    def init_tree_cache(self) -> None:
        """The radix prefix cache (SGLang's default; 0.5.14 keeps it on for Frozen-KV MTP, setting
        disable_radix_cache only for other features), with a host tier under ``--enable-hierarchical-cache``."""
        s = self.s
        self.tree_cache: RadixCache | None = None
        if not s.radix_cache:
            return
        host = None
        if s.hicache:
            cfg = s.target
            per_token = cfg.num_layers * cfg.num_attention_heads * cfg.head_dim * 2 * 4  # K and V, float32
            # --hicache-size (GB) overrides the ratio; else host = ratio x device (memory_pool_host.py 0.5.14 :1438-1440)
            size = (int(s.hicache_size_gb * 1e9 // per_token) if s.hicache_size_gb
                    else int(s.max_total_tokens * s.hicache_ratio))
            host = HostPool(size, cfg.num_layers, (cfg.num_attention_heads, cfg.head_dim))
            logger.info("%s HiCache host pool: %d token slots (draft view restored on load-back: %s)",
                        SIM_LABEL, size, "yes" if s.draft_cache == "post-fix" else "no, draft-cache pre-fix")
        self.tree_cache = RadixCache(self.allocator.free, host, self._backup, self._restore)
        self.allocator.evict = self.tree_cache.evict

    def _backup(self, device: list[int], host_slots: list[int]) -> None:
        assert self.tree_cache is not None and self.tree_cache.host is not None
        h, dev = self.tree_cache.host, torch.tensor(device, dtype=torch.int64)
        for layer in range(len(self.pool.k)):
            h.k[layer][host_slots] = self.pool.k[layer][dev].cpu()
            h.v[layer][host_slots] = self.pool.v[layer][dev].cpu()
            h.draft_k[layer][host_slots] = self.pool.draft_k[layer][dev].cpu()
            h.draft_v[layer][host_slots] = self.pool.draft_v[layer][dev].cpu()

    def _restore(self, host_slots: list[int], device: list[int]) -> None:
        assert self.tree_cache is not None and self.tree_cache.host is not None
        h, dev = self.tree_cache.host, torch.tensor(device, dtype=torch.int64, device=self.device)
        for layer in range(len(self.pool.k)):
            self.pool.k[layer][dev] = h.k[layer][host_slots].to(self.device)
            self.pool.v[layer][dev] = h.v[layer][host_slots].to(self.device)
            if self.s.draft_cache == "post-fix":
                # The fix: the draft's view is loaded back with the target's KV. At pre-fix the reused slots keep
                # whatever the draft view held there before (another request's tokens).
                self.pool.draft_k[layer][dev] = h.draft_k[layer][host_slots].to(self.device)
                self.pool.draft_v[layer][dev] = h.draft_v[layer][host_slots].to(self.device)

    def _match(self, r: Req) -> None:
        """Give ``r`` its request slot and lock the longest cached prefix of its prompt (loading host-only nodes
        back into fresh device slots): ``seq_len`` and ``cached_tokens`` become its length."""
        r.req_pool_idx = self.req_pool.alloc()
        if self.tree_cache is None:
            return
        # At least one prompt token is computed, its logits give the first output token
        # (schedule_batch.py 0.5.14 _compute_max_prefix_len :1223-1228).
        match = self.tree_cache.match_prefix(r.input_ids[: max(len(r.input_ids) - 1, 0)])
        if not len(match):
            return
        self.tree_cache.lock(match.path)  # what the load-back evicts to make room must not be the path itself
        if match.host_hit:
            first = len(match) - match.host_hit  # the device tier is prefix-closed: host-only nodes come last
            self.tree_cache.load_back(match.path[first:], self.allocator.alloc(match.host_hit))
        self.req_pool.req_to_token[r.req_pool_idx, : len(match)] = torch.tensor(
            [n.slot for n in match.path], dtype=torch.int64, device=self.device)
        r.prefix_match = match
        r.seq_len = r.cached_tokens = len(match)
        r.cached_tokens_host = match.host_hit

    # -- requests ---------------------------------------------------------------------------
    def _budget(self, r: Req) -> int:
        scratch = (self.worker.topk * (self.worker.chain_len + 1) + self.worker.chain_len + 1) if self.worker else 1
        return len(r.input_ids) + r.max_new_tokens + scratch

    def add_request(self, msg: dict) -> None:
        p = msg["sampling_params"]
        r = Req(rid=msg["rid"], input_ids=list(msg["input_ids"]), max_new_tokens=int(p["max_new_tokens"]),
                temperature=float(p["temperature"]), ignore_eos=bool(p["ignore_eos"]),
                stop_token_ids=tuple(p.get("stop_token_ids") or (EOS_ID,)),
                count_in_stats=bool(msg.get("count_in_stats", True)))
        if float(p["temperature"]) > 0:
            seed = p.get("seed") or (self.s.seed * 1_000_003 + zlib.crc32(r.rid.encode()))
            r.generator = torch.Generator().manual_seed(int(seed))
        if self._budget(r) > self.s.max_total_tokens or len(r.input_ids) + r.max_new_tokens > self.s.context_length:
            r.finish_reason = {"type": "abort", "message": (
                f"The request needs {len(r.input_ids)} prompt + {r.max_new_tokens} new tokens; the reference server's "
                f"limits are context_length={self.s.context_length}, max_total_tokens={self.s.max_total_tokens}")}
            self._send(r)
            return
        if r.count_in_stats and self._first_arrival is None:
            self._first_arrival = time.monotonic()
        self.waiting.append(r)

    def abort(self, rid: str) -> None:
        if self.chunked_req is not None and self.chunked_req.rid == rid:
            r, self.chunked_req = self.chunked_req, None
            r.finish_reason = {"type": "abort", "message": "aborted"}
            self._release(r)
            self._send(r)
        for queue in (self.waiting, self.running):
            for r in list(queue):
                if r.rid == rid:
                    queue.remove(r)
                    r.finish_reason = {"type": "abort", "message": "aborted"}
                    if r.req_pool_idx >= 0:
                        self._release(r)
                    self._send(r)

    def _release(self, r: Req) -> None:
        slots = self.req_pool.req_to_token[r.req_pool_idx, : r.seq_len].clone()
        if self.tree_cache is None:
            self.allocator.free(slots)
        else:
            # SGLang's cache_finished_req: the request's KV joins the tree (token i of prompt + output in slot i;
            # the last output token has none yet). A verify step cut short by max_new_tokens wrote KV for drafts
            # the output never took: those slots hold no token of the request and go back to the allocator.
            tokens = (r.input_ids + r.output_ids)[: r.seq_len]
            self.tree_cache.insert(tokens, slots[: len(tokens)])
            self.allocator.free(slots[len(tokens):])
            if r.prefix_match is not None:
                self.tree_cache.unlock(r.prefix_match.path)
                r.prefix_match = None
        self.req_pool.free(r.req_pool_idx)
        r.req_pool_idx = -1

    def _send(self, r: Req) -> None:
        self.out.send(("out", r.rid, r.output_ids[r.sent_len:], r.meta_info(self.s.speculative), r.finish_reason))
        r.sent_len = len(r.output_ids)

    def _append(self, r: Req, tokens: list[int]) -> None:
        for t in tokens:
            r.output_ids.append(t)
            if r.count_in_stats:
                self.stats["completion_tokens"] += 1
            if not r.ignore_eos and t in r.stop_token_ids:
                r.finish_reason = {"type": "stop", "matched": t}
                break
            if len(r.output_ids) >= r.max_new_tokens:
                r.finish_reason = {"type": "length", "length": r.max_new_tokens}
                break
        r.pending = r.output_ids[-1]

    # -- one iteration ------------------------------------------------------------------------
    def run_prefill(self, batch: list[tuple[Req, int]]) -> None:
        dev = self.device
        ids: list[int] = []
        positions: list[int] = []
        spans: list[SeqSpan] = []
        for r, take in batch:
            if r.seq_len == r.cached_tokens and r.count_in_stats:  # its first chunk
                self.stats["prompt_tokens"] += len(r.input_ids)
                self.stats["cached_tokens"] += r.cached_tokens
            # Only the tokens past the cached prefix (and the chunks before) are extended: the prefill's
            # out_cache_loc (the stale value of #28264) holds one slot per extended token.
            spans.append(SeqSpan(start=len(ids), length=take, req_pool_idx=r.req_pool_idx, prefix_len=r.seq_len))
            ids.extend(r.input_ids[r.seq_len : r.seq_len + take])
            positions.extend(range(r.seq_len, r.seq_len + take))
        # One slot per extend token (schedule_batch.py 0.5.14 :2044, :2208): cached prefixes take none; the
        # allocator asks the prefix cache to evict when it runs short.
        slots = self.allocator.alloc(len(ids))
        for (r, take), span in zip(batch, spans):
            self.req_pool.req_to_token[r.req_pool_idx, r.seq_len : r.seq_len + take] = slots[span.start : span.start + take]
            r.seq_len += take
        fb = ForwardBatch(
            forward_mode=ForwardMode.EXTEND, batch_size=len(batch),
            input_ids=torch.tensor(ids, dtype=torch.int64, device=dev),
            positions=torch.tensor(positions, dtype=torch.int64, device=dev),
            seq_lens=torch.tensor([r.seq_len for r, _ in batch], dtype=torch.int64, device=dev),
            req_pool_indices=torch.tensor([r.req_pool_idx for r, _ in batch], dtype=torch.int64, device=dev),
            out_cache_loc=slots, spans=spans,
        )
        logits = self.target_runner.forward(fb)
        self.stats["forward_steps"] += 1
        done = [(r, span) for (r, _), span in zip(batch, spans) if r is not self.chunked_req]
        for r, span in done:
            tok = int(sample(logits[span.start + span.length - 1 : span.start + span.length], r.temperature, r.generator))
            self._append(r, [tok])
        # SGLang (scheduler.py 0.5.14 :2599-2625): the finished prefill batch is filtered (the chunked
        # request and finished requests leave it) and becomes the running batch as it is when none is
        # running, keeping its out_cache_loc (the stale value); a real filter_batch (schedule_batch.py
        # :2728) or a merge into a running batch (merge_batch :2779) sets it to None.
        merged = bool(self.running)
        filtered = len(done) < len(batch) or any(r.finish_reason is not None for r, _ in done)
        reqs = [r for r, _ in done]
        self.running.extend(reqs)
        alive = [r for r in reqs if r.finish_reason is None]
        if self.worker is not None and alive:
            self._draft(alive, None if merged or filtered else slots)  # the draft inherits the batch's out_cache_loc

    def _draft(self, reqs: list[Req], last_out_cache_loc: torch.Tensor | None) -> None:
        assert self.worker is not None
        draft_fb = self.worker.build_draft_batch(reqs, last_out_cache_loc)
        drafts = self.worker.draft(draft_fb)
        self.stats["draft_steps"] += self.worker.chain_len
        for r, d in zip(reqs, drafts):
            r.drafts = d

    def run_decode(self) -> None:
        reqs = self.running
        if self.worker is not None:
            new_tokens, last_locs = self.worker.verify(reqs)
            self.stats["forward_steps"] += 1
            self.metrics_reporter.on_decode_batch(sum(len(t) - 1 for t in new_tokens), len(reqs))
            for r, toks in zip(reqs, new_tokens):
                self._append(r, toks)
                if r.count_in_stats:
                    self.stats["verify_steps"] += 1
                    self.stats["accepted_drafts"] += len(toks) - 1  # the last one is the bonus token
                    self.stats["proposed_drafts"] += self.worker.chain_len
            alive = [i for i, r in enumerate(reqs) if r.finish_reason is None]
            if alive:
                self._draft([reqs[i] for i in alive], last_locs[alive])
            return
        dev = self.device
        slots = self.allocator.alloc(len(reqs))
        fb = ForwardBatch(
            forward_mode=ForwardMode.DECODE, batch_size=len(reqs),
            input_ids=torch.tensor([r.pending for r in reqs], dtype=torch.int64, device=dev),
            positions=torch.tensor([r.seq_len for r in reqs], dtype=torch.int64, device=dev),
            seq_lens=torch.tensor([r.seq_len for r in reqs], dtype=torch.int64, device=dev),
            req_pool_indices=torch.tensor([r.req_pool_idx for r in reqs], dtype=torch.int64, device=dev),
            out_cache_loc=slots,
            spans=[SeqSpan(start=i, length=1, req_pool_idx=r.req_pool_idx, prefix_len=r.seq_len)
                   for i, r in enumerate(reqs)],
        )
        logits = self.target_runner.forward(fb)
        self.stats["forward_steps"] += 1
        for i, r in enumerate(reqs):
            self.req_pool.req_to_token[r.req_pool_idx, r.seq_len] = slots[i]
            r.seq_len += 1
            self._append(r, [int(sample(logits[i : i + 1], r.temperature, r.generator))])

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
        st["draft_kv_writes"] = self.worker.draft_kv_writes if self.worker else 0
        st["free_kv_slots"] = self.allocator.available_size()
        tree = getattr(self, "tree_cache", None)
        st["prefix_cache"] = None if tree is None else {
            "device_tokens": tree.device_tokens, "evicted_tokens": tree.evicted_tokens,
            "loaded_back_tokens": tree.loaded_back_tokens,
            "host_tokens": None if tree.host is None else tree.host.size - tree.host.available()}
        st["gen_throughput"] = stats["completion_tokens"] / stats["busy_s"] if stats["busy_s"] else 0.0
        # From the first counted request's arrival to the last one's finish: the window a client's
        # wall-clock throughput measures, less the network on either end.
        span = (self._last_finish - self._first_arrival) if self._first_arrival and self._last_finish else None
        st["span_s"] = span
        st["span_throughput"] = stats["completion_tokens"] / span if span else None
        st["scheduler"] = "model"  # or "standin" (harness.sim.standin): which computed these figures
        return st

    def flush_cache(self) -> bool:
        # Like SGLang: refuse while requests are in flight; reset the tree (device and host tiers) and the
        # metrics reporter's counters (scheduler.py 0.5.14 :3645, :3649).
        if self.has_work():
            return False
        if self.tree_cache is not None:
            self.tree_cache.reset()
        self.metrics_reporter.reset_metrics()
        return True
